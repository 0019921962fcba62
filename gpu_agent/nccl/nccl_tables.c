/* SPDX-License-Identifier: Apache-2.0
 * nccl_tables.c — the versioned symbols NCCL looks up in libnccl-net-tally.so
 * (ncclNetPlugin_vN, ncclCollNetPlugin_vN): thin adapters over nccl_net.c / nccl_coll.c.
 * v11: NCCL 2.28; v10: 2.24 .. 2.27; v9: 2.22, 2.23; v8: 2.19 .. 2.21; v7: 2.18.
 */
#include "nccl_int.h"

#include <string.h>

ncclDebugLogger_t nccl_log_fn;

#define PLUGIN_NAME "Tally"
#define COLL_SPEED_MBPS 100000

/* ---------------- shared ---------------- */
static ncclResult_t regmr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle)
{
	(void)comm; (void)data; (void)size; (void)type; (void)offset; (void)fd; (void)mhandle;
	NCCL_WARN("NET/Tally: DMA-BUF registration is not supported (host memory only)");
	return ncclInternalError;
}

static ncclResult_t coll_regmr_dmabuf(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle)
{
	return regmr_dmabuf(comm, data, size, type, offset, fd, mhandle);
}

static ncclResult_t coll_iflush(void *cc, void *data, int size, void *mh, void **request)
{
	(void)cc; (void)data; (void)size; (void)mh;
	*request = NULL; /* host memory: nothing to flush */
	return ncclSuccess;
}

static ncclResult_t net_iflush(void *rc, int n, void **data, int *sizes, void **mh, void **req)
{
	(void)n; (void)data; (void)sizes; (void)mh;
	return nccl_net_iflush(rc, req);
}

static ncclResult_t net_get_device_mr(void *comm, void *mh, void **dptr)
{
	(void)comm; (void)mh; (void)dptr;
	return ncclInternalError; /* no device offload */
}

static ncclResult_t net_irecv_consumed(void *rc, int n, void *request)
{
	(void)rc; (void)n; (void)request;
	return ncclSuccess;
}

#define FILL_PROPS(p, spd)                                                          \
	do {                                                                          \
		memset((p), 0, sizeof(*(p)));                                         \
		nccl_net_props(dev, &(p)->speed, &(p)->name, &(p)->pciPath);          \
		(p)->speed = (spd) ? (spd) : (p)->speed;                          \
		(p)->guid = 0x74616c6c79ull + (uint64_t)dev;                         \
		(p)->ptrSupport = NCCL_PTR_HOST;                                      \
		(p)->regIsGlobal = 0;                                                 \
		(p)->port = 0;                                                        \
		(p)->latency = 0;                                                     \
		(p)->maxComms = 65536;                                                \
		(p)->maxRecvs = 1;                                                    \
		(p)->netDeviceType = NCCL_NET_DEVICE_HOST;                            \
		(p)->netDeviceVersion = 0;                                            \
	} while (0)

/* ---------------- v11 ---------------- */
static ncclResult_t net11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
			       ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	(void)comm_id; (void)config; (void)prof;
	*ctx = NULL;
	return nccl_net_init(log, 11);
}

static void props11_sizes(int dev, ncclNetProperties_v11_t *p)
{
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = dev;
	p->maxP2pBytes = (size_t)1 << 30;
	p->maxCollBytes = (size_t)512 << 20;
	p->maxMultiRequestSize = 1;
	p->forceFlush = 0;
}

static ncclResult_t net11_props(int dev, ncclNetProperties_v11_t *p)
{
	FILL_PROPS(p, 0);
	props11_sizes(dev, p);
	return ncclSuccess;
}

static ncclResult_t net11_listen(void *ctx, int dev, void *handle, void **lc)
{
	(void)ctx;
	return nccl_net_listen(dev, handle, lc);
}

static ncclResult_t net11_connect(void *ctx, int dev, void *handle, void **sc,
				  ncclNetDeviceHandle_v11_t **dc)
{
	(void)ctx;
	if (dc)
		*dc = NULL;
	return nccl_net_connect(dev, handle, sc);
}

static ncclResult_t net11_accept(void *lc, void **rc, ncclNetDeviceHandle_v11_t **dc)
{
	if (dc)
		*dc = NULL;
	return nccl_net_accept(lc, rc);
}

static ncclResult_t net11_isend(void *sc, void *data, size_t size, int tag, void *mh, void *ph,
				void **req)
{
	(void)mh; (void)ph;
	return nccl_net_isend(sc, data, size, tag, req);
}

static ncclResult_t net11_irecv(void *rc, int n, void **data, size_t *sizes, int *tags,
				void **mh, void **ph, void **req)
{
	(void)mh; (void)ph;
	return nccl_net_irecv(rc, n, data, sizes, tags, req);
}

static ncclResult_t net11_make_vdevice(int *d, ncclNetVDeviceProps_v11_t *props)
{
	(void)props;
	*d = 0;
	return ncclSuccess; /* one device: every virtual NIC is it */
}

static ncclResult_t net11_finalize(void *ctx)
{
	(void)ctx;
	return ncclSuccess;
}

static ncclResult_t net11_set_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	(void)ctx; (void)attr;
	return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = PLUGIN_NAME,
	.init = net11_init,
	.devices = nccl_net_devices,
	.getProperties = net11_props,
	.listen = net11_listen,
	.connect = net11_connect,
	.accept = net11_accept,
	.regMr = nccl_net_regmr,
	.regMrDmaBuf = regmr_dmabuf,
	.deregMr = nccl_net_deregmr,
	.isend = net11_isend,
	.irecv = net11_irecv,
	.iflush = net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close,
	.closeRecv = nccl_net_close,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = net_get_device_mr,
	.irecvConsumed = net_irecv_consumed,
	.makeVDevice = net11_make_vdevice,
	.finalize = net11_finalize,
	.setNetAttr = net11_set_attr,
};

static ncclResult_t coll11_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t log)
{
	(void)comm_id;
	*ctx = NULL;
	return nccl_coll_init(log, 11);
}

static ncclResult_t coll11_props(int dev, ncclNetProperties_v11_t *p)
{
	FILL_PROPS(p, COLL_SPEED_MBPS);
	props11_sizes(dev, p);
	return ncclSuccess;
}

static ncclResult_t coll11_listen(void *ctx, int dev, void *handle, void **lc)
{
	(void)ctx;
	return nccl_coll_listen(dev, handle, lc);
}

static ncclResult_t coll11_iallgather(void *cc, void *send, int n, ncclNetSGE_v11_t *parts,
				      size_t bpr, size_t woff, size_t wbytes, void *smh, void **req)
{
	void *addr = n > 0 ? parts[0].address : NULL;
	size_t size = n > 0 ? parts[0].size : 0;

	(void)smh;
	return nccl_coll_iallgather(cc, send, n, &addr, &size, bpr, woff, wbytes, req);
}

static ncclResult_t coll11_ireducescatter(void *cc, int n, ncclNetSGE_v11_t *parts, void *recv,
					  size_t bpr, size_t woff, size_t wbytes,
					  ncclDataType_t dt, ncclRedOp_t op, void *rmh, void **req)
{
	void *addr = n > 0 ? parts[0].address : NULL;
	size_t size = n > 0 ? parts[0].size : 0;

	(void)rmh;
	return nccl_coll_ireducescatter(cc, n, &addr, &size, recv, bpr, woff, wbytes, dt, op, req);
}

__attribute__((visibility("default"))) const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
	.name = PLUGIN_NAME,
	.init = coll11_init,
	.devices = nccl_coll_devices,
	.getProperties = coll11_props,
	.listen = coll11_listen,
	.connect = nccl_coll_connect,
	.reduceSupport = nccl_coll_reduce_support,
	.regMr = nccl_coll_regmr,
	.regMrDmaBuf = coll_regmr_dmabuf,
	.deregMr = nccl_coll_deregmr,
	.iallreduce = nccl_coll_iallreduce,
	.iallgather = coll11_iallgather,
	.ireducescatter = coll11_ireducescatter,
	.iflush = coll_iflush,
	.test = nccl_coll_test,
	.closeColl = nccl_coll_close,
	.closeListen = nccl_coll_close_listen,
	.makeVDevice = net11_make_vdevice,
	.finalize = net11_finalize,
};

/* ---------------- v8 ---------------- */
static ncclResult_t net8_init(ncclDebugLogger_t log)
{
	return nccl_net_init(log, 8);
}

static ncclResult_t net8_props(int dev, ncclNetProperties_v8_t *p)
{
	FILL_PROPS(p, 0);
	return ncclSuccess;
}

static ncclResult_t net8_connect(int dev, void *handle, void **sc, ncclNetDeviceHandle_v8_t **dc)
{
	if (dc)
		*dc = NULL;
	return nccl_net_connect(dev, handle, sc);
}

static ncclResult_t net8_isend(void *sc, void *data, int size, int tag, void *mh, void **req)
{
	(void)mh;
	return nccl_net_isend(sc, data, (size_t)size, tag, req);
}

static ncclResult_t net8_irecv(void *rc, int n, void **data, int *sizes, int *tags, void **mh,
			       void **req)
{
	size_t sz;

	(void)mh;
	if (n != 1)
		return nccl_net_irecv(rc, n, data, NULL, tags, req);
	sz = (size_t)sizes[0];
	return nccl_net_irecv(rc, 1, data, &sz, tags, req);
}

__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = PLUGIN_NAME,
	.init = net8_init,
	.devices = nccl_net_devices,
	.getProperties = net8_props,
	.listen = nccl_net_listen,
	.connect = net8_connect,
	.accept = net11_accept,
	.regMr = nccl_net_regmr,
	.regMrDmaBuf = regmr_dmabuf,
	.deregMr = nccl_net_deregmr,
	.isend = net8_isend,
	.irecv = net8_irecv,
	.iflush = net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close,
	.closeRecv = nccl_net_close,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = net_get_device_mr,
	.irecvConsumed = net_irecv_consumed,
};

static ncclResult_t coll8_init(ncclDebugLogger_t log)
{
	return nccl_coll_init(log, 8);
}

static ncclResult_t coll8_props(int dev, ncclNetProperties_v8_t *p)
{
	FILL_PROPS(p, COLL_SPEED_MBPS);
	return ncclSuccess;
}

static ncclResult_t coll8_iallreduce(void *cc, void *send, void *recv, int count,
				     ncclDataType_t dt, ncclRedOp_t op, void *smh, void *rmh,
				     void **req)
{
	return nccl_coll_iallreduce(cc, send, recv, (size_t)count, dt, op, smh, rmh, req);
}

static ncclResult_t coll8_iallgather(void *cc, void *send, int n, ncclNetSGE_v8_t *parts,
				     size_t bpr, size_t woff, size_t wbytes, void *smh, void **req)
{
	void *addr = n > 0 ? parts[0].address : NULL;
	size_t size = n > 0 ? parts[0].size : 0;

	(void)smh;
	return nccl_coll_iallgather(cc, send, n, &addr, &size, bpr, woff, wbytes, req);
}

static ncclResult_t coll8_ireducescatter(void *cc, int n, ncclNetSGE_v8_t *parts, void *recv,
					 size_t bpr, size_t woff, size_t wbytes, ncclDataType_t dt,
					 ncclRedOp_t op, void *rmh, void **req)
{
	void *addr = n > 0 ? parts[0].address : NULL;
	size_t size = n > 0 ? parts[0].size : 0;

	(void)rmh;
	return nccl_coll_ireducescatter(cc, n, &addr, &size, recv, bpr, woff, wbytes, dt, op, req);
}

__attribute__((visibility("default"))) const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
	.name = PLUGIN_NAME,
	.init = coll8_init,
	.devices = nccl_coll_devices,
	.getProperties = coll8_props,
	.listen = nccl_coll_listen,
	.connect = nccl_coll_connect,
	.reduceSupport = nccl_coll_reduce_support,
	.regMr = nccl_coll_regmr,
	.regMrDmaBuf = coll_regmr_dmabuf,
	.deregMr = nccl_coll_deregmr,
	.iallreduce = coll8_iallreduce,
	.iallgather = coll8_iallgather,
	.ireducescatter = coll8_ireducescatter,
	.iflush = coll_iflush,
	.test = nccl_coll_test,
	.closeColl = nccl_coll_close,
	.closeListen = nccl_coll_close_listen,
};

/* ---------------- v9 (NCCL 2.22, 2.23) and v10 (2.24 .. 2.27) ---------------- */
static ncclResult_t net10_props(int dev, ncclNetProperties_v10_t *p)
{
	FILL_PROPS(p, 0);
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = dev;
	p->maxP2pBytes = (size_t)1 << 30;
	p->maxCollBytes = (size_t)512 << 20;
	return ncclSuccess;
}

static ncclResult_t coll10_props(int dev, ncclNetProperties_v10_t *p)
{
	net10_props(dev, p);
	p->speed = COLL_SPEED_MBPS;
	return ncclSuccess;
}

static ncclResult_t net9_init(ncclDebugLogger_t log)
{
	return nccl_net_init(log, 9);
}

static ncclResult_t net10_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof)
{
	(void)prof;
	return nccl_net_init(log, 10);
}

static ncclResult_t net10_connect(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				  void **sc, ncclNetDeviceHandle_v10_t **dc)
{
	(void)config;
	return net8_connect(dev, handle, sc, dc);
}

static ncclResult_t net9_isend(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
	(void)mh;
	return nccl_net_isend(sc, data, size, tag, req);
}

static ncclResult_t net9_irecv(void *rc, int n, void **data, size_t *sizes, int *tags,
			       void **mh, void **req)
{
	(void)mh;
	return nccl_net_irecv(rc, n, data, sizes, tags, req);
}

static ncclResult_t net10_make_vdevice(int *d, ncclNetVDeviceProps_v10_t *props)
{
	(void)props;
	*d = 0;
	return ncclSuccess;
}

#define NET_V9_V10_COMMON                                                                 \
	.name = PLUGIN_NAME, .devices = nccl_net_devices, .getProperties = net10_props,   \
	.listen = nccl_net_listen, .accept = net11_accept, .regMr = nccl_net_regmr,       \
	.regMrDmaBuf = regmr_dmabuf, .deregMr = nccl_net_deregmr, .iflush = net_iflush,   \
	.test = nccl_net_test, .closeSend = nccl_net_close, .closeRecv = nccl_net_close,  \
	.closeListen = nccl_net_close_listen, .getDeviceMr = net_get_device_mr,           \
	.irecvConsumed = net_irecv_consumed, .makeVDevice = net10_make_vdevice

__attribute__((visibility("default"))) const ncclNet_v10_t ncclNetPlugin_v10 = {
	NET_V9_V10_COMMON,
	.init = net10_init,
	.connect = net10_connect,
	.isend = net11_isend,
	.irecv = net11_irecv,
};

__attribute__((visibility("default"))) const ncclNet_v9_t ncclNetPlugin_v9 = {
	NET_V9_V10_COMMON,
	.init = net9_init,
	.connect = net8_connect,
	.isend = net9_isend,
	.irecv = net9_irecv,
};

static ncclResult_t coll10_init(ncclDebugLogger_t log)
{
	return nccl_coll_init(log, 10);
}

static ncclResult_t coll9_init(ncclDebugLogger_t log)
{
	return nccl_coll_init(log, 9);
}

static ncclResult_t coll10_iallgather(void *cc, void *send, int n, ncclNetSGE_v10_t *parts,
				      size_t bpr, size_t woff, size_t wbytes, void *smh, void **req)
{
	return coll11_iallgather(cc, send, n, (ncclNetSGE_v11_t *)parts, bpr, woff, wbytes, smh,
				 req);
}

static ncclResult_t coll10_ireducescatter(void *cc, int n, ncclNetSGE_v10_t *parts, void *recv,
					  size_t bpr, size_t woff, size_t wbytes,
					  ncclDataType_t dt, ncclRedOp_t op, void *rmh, void **req)
{
	return coll11_ireducescatter(cc, n, (ncclNetSGE_v11_t *)parts, recv, bpr, woff, wbytes, dt,
				     op, rmh, req);
}

#define COLL_V9_V10_COMMON                                                                \
	.name = PLUGIN_NAME, .devices = nccl_coll_devices, .getProperties = coll10_props, \
	.listen = nccl_coll_listen, .connect = nccl_coll_connect,                          \
	.reduceSupport = nccl_coll_reduce_support, .regMr = nccl_coll_regmr,               \
	.regMrDmaBuf = coll_regmr_dmabuf, .deregMr = nccl_coll_deregmr,                    \
	.iallreduce = nccl_coll_iallreduce, .iallgather = coll10_iallgather,               \
	.ireducescatter = coll10_ireducescatter, .iflush = coll_iflush,                    \
	.test = nccl_coll_test, .closeColl = nccl_coll_close,                              \
	.closeListen = nccl_coll_close_listen, .makeVDevice = net10_make_vdevice

__attribute__((visibility("default"))) const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
	COLL_V9_V10_COMMON,
	.init = coll10_init,
};

__attribute__((visibility("default"))) const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
	COLL_V9_V10_COMMON,
	.init = coll9_init,
};

/* ---------------- v7 (NCCL 2.18): v8 without regIsGlobal, int regMr sizes, no
 * iallgather / ireducescatter ---------------- */
static ncclResult_t net7_init(ncclDebugLogger_t log)
{
	return nccl_net_init(log, 7);
}

static void props7(int dev, ncclNetProperties_v7_t *p, int speed)
{
	ncclNetProperties_v8_t p8;

	FILL_PROPS(&p8, speed);
	memset(p, 0, sizeof(*p));
	p->name = p8.name;
	p->pciPath = p8.pciPath;
	p->guid = p8.guid;
	p->ptrSupport = p8.ptrSupport;
	p->speed = p8.speed;
	p->port = p8.port;
	p->latency = p8.latency;
	p->maxComms = p8.maxComms;
	p->maxRecvs = p8.maxRecvs;
	p->netDeviceType = p8.netDeviceType;
	p->netDeviceVersion = p8.netDeviceVersion;
}

static ncclResult_t net7_props(int dev, ncclNetProperties_v7_t *p)
{
	props7(dev, p, 0);
	return ncclSuccess;
}

static ncclResult_t net7_regmr(void *comm, void *data, int size, int type, void **mh)
{
	if (size < 0)
		return ncclInvalidArgument;
	return nccl_net_regmr(comm, data, (size_t)size, type, mh);
}

__attribute__((visibility("default"))) const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = PLUGIN_NAME,
	.init = net7_init,
	.devices = nccl_net_devices,
	.getProperties = net7_props,
	.listen = nccl_net_listen,
	.connect = net8_connect,
	.accept = net11_accept,
	.regMr = net7_regmr,
	.regMrDmaBuf = regmr_dmabuf,
	.deregMr = nccl_net_deregmr,
	.isend = net8_isend,
	.irecv = net8_irecv,
	.iflush = net_iflush,
	.test = nccl_net_test,
	.closeSend = nccl_net_close,
	.closeRecv = nccl_net_close,
	.closeListen = nccl_net_close_listen,
	.getDeviceMr = net_get_device_mr,
	.irecvConsumed = net_irecv_consumed,
};

static ncclResult_t coll7_init(ncclDebugLogger_t log)
{
	return nccl_coll_init(log, 7);
}

static ncclResult_t coll7_props(int dev, ncclNetProperties_v7_t *p)
{
	props7(dev, p, COLL_SPEED_MBPS);
	return ncclSuccess;
}

static ncclResult_t coll7_regmr(void *cc, void *data, int size, int type, void **mh)
{
	if (size < 0)
		return ncclInvalidArgument;
	return nccl_coll_regmr(cc, data, (size_t)size, type, mh);
}

__attribute__((visibility("default"))) const ncclCollNet_v7_t ncclCollNetPlugin_v7 = {
	.name = PLUGIN_NAME,
	.init = coll7_init,
	.devices = nccl_coll_devices,
	.getProperties = coll7_props,
	.listen = nccl_coll_listen,
	.connect = nccl_coll_connect,
	.reduceSupport = nccl_coll_reduce_support,
	.regMr = coll7_regmr,
	.regMrDmaBuf = coll_regmr_dmabuf,
	.deregMr = nccl_coll_deregmr,
	.iallreduce = coll8_iallreduce,
	.iflush = coll_iflush,
	.test = nccl_coll_test,
	.closeColl = nccl_coll_close,
	.closeListen = nccl_coll_close_listen,
};
