/* SPDX-License-Identifier: Apache-2.0
 * nccl_api.h — the harness's view of one version of the plugin: the tables NCCL looks up
 * (dlsym of ncclNetPlugin_vN / ncclCollNetPlugin_vN) and calls made with each version's own
 * signatures, as NCCL's src/plugin/net/net_vN.cc makes them.
 */
#ifndef TESTS_NCCL_API_H
#define TESTS_NCCL_API_H

#include "nccl_abi.h"

struct napi {
	int ver;
	const ncclNet_v7_t *n7;
	const ncclCollNet_v7_t *c7; /* no iallgather / ireducescatter */
	const ncclNet_v8_t *n8;
	const ncclCollNet_v8_t *c8;
	const ncclNet_v9_t *n9;
	const ncclNet_v10_t *n10;
	const ncclCollNet_v10_t *c10; /* v9's CollNet table is v10's */
	const ncclNet_v11_t *n11;
	const ncclCollNet_v11_t *c11;
};

extern char napi_log[1 << 16]; /* what the plugin logged in this process */

/* dlopen + dlsym of both tables of version ver (7 .. 11). 0, or -1 with a message. */
int napi_load(struct napi *a, const char *so, int ver);

ncclResult_t napi_net_init(struct napi *a);
ncclResult_t napi_net_devices(struct napi *a, int *n, int *ptr_support, int *max_recvs);
ncclResult_t napi_net_listen(struct napi *a, void *handle, void **lc);
ncclResult_t napi_net_connect(struct napi *a, void *handle, void **sc);
ncclResult_t napi_net_accept(struct napi *a, void *lc, void **rc);
ncclResult_t napi_net_isend(struct napi *a, void *sc, void *d, size_t n, int tag, void **req);
ncclResult_t napi_net_irecv(struct napi *a, void *rc, void *d, size_t n, int tag, void **req);
ncclResult_t napi_net_test(struct napi *a, void *req, int *done, int *size);
ncclResult_t napi_net_close(struct napi *a, void *sc, void *rc, void *lc);

ncclResult_t napi_coll_init(struct napi *a);
ncclResult_t napi_coll_devices(struct napi *a, int *n, int *ptr_support);
ncclResult_t napi_coll_listen(struct napi *a, void *handle, void **lc);
ncclResult_t napi_coll_connect(struct napi *a, void **handles, int n, int rank, void *lc,
			       void **cc);
ncclResult_t napi_coll_support(struct napi *a, ncclDataType_t dt, ncclRedOp_t op, int *s);
ncclResult_t napi_coll_regmr(struct napi *a, void *cc, void *d, size_t n, void **mh);
ncclResult_t napi_coll_deregmr(struct napi *a, void *cc, void *mh);
ncclResult_t napi_coll_iallreduce(struct napi *a, void *cc, void *s, void *r, size_t count,
				  ncclDataType_t dt, void *smh, void *rmh, void **req);
/* v7 has none: ncclInvalidUsage. One receive (send) part: the window [woff, woff + wbytes) of the nranks x bpr buffer */
ncclResult_t napi_coll_iallgather(struct napi *a, void *cc, void *send, void *win, size_t bpr,
				  size_t woff, size_t wbytes, void *smh, void *wmh, void **req);
ncclResult_t napi_coll_ireducescatter(struct napi *a, void *cc, void *win, void *recv, size_t bpr,
				      size_t woff, size_t wbytes, ncclDataType_t dt, void *wmh,
				      void *rmh, void **req);
ncclResult_t napi_coll_test(struct napi *a, void *req, int *done, int *size);
ncclResult_t napi_coll_close(struct napi *a, void *cc, void *lc);

#endif
