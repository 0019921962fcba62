/* SPDX-License-Identifier: Apache-2.0
 * nccl_int.h — the one implementation behind libnccl-net-tally's versioned tables
 * (nccl_tables.c): the net part over kernel TCP (nccl_net.c) and the CollNet part over the
 * agent library (nccl_coll.c). Sizes are size_t here; the v8 adapters widen their ints.
 */
#ifndef TALLY_NCCL_INT_H
#define TALLY_NCCL_INT_H

#include "nccl_abi.h"

extern ncclDebugLogger_t nccl_log_fn;
#define NCCL_LOG(lvl, ...)                                                             \
	do {                                                                           \
		if (nccl_log_fn)                                                       \
			nccl_log_fn(lvl, NCCL_NET | NCCL_INIT, __FILE__, __LINE__,     \
				    __VA_ARGS__);                                      \
	} while (0)
#define NCCL_WARN(...) NCCL_LOG(NCCL_LOG_WARN, __VA_ARGS__)
#define NCCL_INFO(...) NCCL_LOG(NCCL_LOG_INFO, __VA_ARGS__)

/* net (TCP) */
ncclResult_t nccl_net_init(ncclDebugLogger_t log, int version);
ncclResult_t nccl_net_devices(int *ndev);
void nccl_net_props(int dev, int *speed_mbps, char **name, char **pci);
ncclResult_t nccl_net_listen(int dev, void *handle, void **listen_comm);
ncclResult_t nccl_net_connect(int dev, void *handle, void **send_comm);
ncclResult_t nccl_net_accept(void *listen_comm, void **recv_comm);
ncclResult_t nccl_net_regmr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t nccl_net_deregmr(void *comm, void *mhandle);
ncclResult_t nccl_net_isend(void *send_comm, void *data, size_t size, int tag, void **request);
ncclResult_t nccl_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			    const int *tags, void **request);
ncclResult_t nccl_net_iflush(void *recv_comm, void **request);
ncclResult_t nccl_net_test(void *request, int *done, int *sizes);
ncclResult_t nccl_net_close(void *comm);
ncclResult_t nccl_net_close_listen(void *listen_comm);

/* CollNet (the appliances) */
ncclResult_t nccl_coll_init(ncclDebugLogger_t log, int version);
ncclResult_t nccl_coll_devices(int *ndev);
ncclResult_t nccl_coll_listen(int dev, void *handle, void **listen_comm);
ncclResult_t nccl_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
			       void **coll_comm);
ncclResult_t nccl_coll_reduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported);
ncclResult_t nccl_coll_regmr(void *coll_comm, void *data, size_t size, int type, void **mh);
ncclResult_t nccl_coll_deregmr(void *coll_comm, void *mh);
ncclResult_t nccl_coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
				  ncclDataType_t dt, ncclRedOp_t op, void *send_mh, void *recv_mh,
				  void **request);
/* the SGE arrays of each version are passed as (address, size) pairs */
ncclResult_t nccl_coll_iallgather(void *coll_comm, void *send, int nparts, void **part_addr,
				  size_t *part_size, size_t bpr, size_t woff, size_t wbytes,
				  void **request);
ncclResult_t nccl_coll_ireducescatter(void *coll_comm, int nparts, void **part_addr,
				      size_t *part_size, void *recv, size_t bpr, size_t woff,
				      size_t wbytes, ncclDataType_t dt, ncclRedOp_t op,
				      void **request);
ncclResult_t nccl_coll_test(void *request, int *done, int *size);
ncclResult_t nccl_coll_close(void *coll_comm);
ncclResult_t nccl_coll_close_listen(void *listen_comm);

#endif
