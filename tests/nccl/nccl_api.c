/* SPDX-License-Identifier: Apache-2.0
 * nccl_api.c — see nccl_api.h.
 */
#include "nccl_api.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

char napi_log[1 << 16];
static size_t napi_log_len;

/* NCCL's logger: the harness keeps the text (the tests look for names in it) and prints it */
static void napi_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
			const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	(void)flags;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	fprintf(stderr, "[nccl %s %s:%d] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", file,
		line, buf);
	if (napi_log_len + strlen(buf) + 2 < sizeof(napi_log)) {
		memcpy(napi_log + napi_log_len, buf, strlen(buf));
		napi_log_len += strlen(buf);
		napi_log[napi_log_len++] = '\n';
		napi_log[napi_log_len] = 0;
	}
}

int napi_load(struct napi *a, const char *so, int ver)
{
	char ns[64], cs[64];
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);

	memset(a, 0, sizeof(*a));
	a->ver = ver;
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", so, dlerror());
		return -1;
	}
	snprintf(ns, sizeof(ns), "ncclNetPlugin_v%d", ver);
	snprintf(cs, sizeof(cs), "ncclCollNetPlugin_v%d", ver);
	void *n = dlsym(h, ns), *c = dlsym(h, cs);
	if (!n || !c) {
		fprintf(stderr, "%s: no %s\n", so, !n ? ns : cs);
		return -1;
	}
	switch (ver) {
	case 7: a->n7 = n; a->c7 = c; break;
	case 8: a->n8 = n; a->c8 = c; break;
	case 9: a->n9 = n; a->c10 = c; break;
	case 10: a->n10 = n; a->c10 = c; break;
	default: a->n11 = n; a->c11 = c; break;
	}
	return 0;
}

ncclResult_t napi_net_init(struct napi *a)
{
	void *ctx;

	if (a->n7)
		return a->n7->init(napi_logger);
	if (a->n9)
		return a->n9->init(napi_logger);
	if (a->n10)
		return a->n10->init(napi_logger, NULL);
	return a->n8 ? a->n8->init(napi_logger) : a->n11->init(&ctx, 1, NULL, napi_logger, NULL);
}

ncclResult_t napi_net_devices(struct napi *a, int *n, int *ptr_support, int *max_recvs)
{
	ncclResult_t r = a->n7 ? a->n7->devices(n) : a->n8 ? a->n8->devices(n) : a->n9 ? a->n9->devices(n)
				 : a->n10 ? a->n10->devices(n) : a->n11->devices(n);

	if (r || *n < 1)
		return r;
	if (a->n7) {
		ncclNetProperties_v7_t p;

		r = a->n7->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
		*max_recvs = p.maxRecvs;
	} else if (a->n9 || a->n10) {
		ncclNetProperties_v10_t p;

		r = a->n9 ? a->n9->getProperties(0, &p) : a->n10->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
		*max_recvs = p.maxRecvs;
	} else if (a->n8) {
		ncclNetProperties_v8_t p;

		r = a->n8->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
		*max_recvs = p.maxRecvs;
	} else {
		ncclNetProperties_v11_t p;

		r = a->n11->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
		*max_recvs = p.maxRecvs;
	}
	return r;
}

ncclResult_t napi_net_listen(struct napi *a, void *handle, void **lc)
{
	if (a->n7)
		return a->n7->listen(0, handle, lc);
	if (a->n9 || a->n10)
		return a->n9 ? a->n9->listen(0, handle, lc) : a->n10->listen(0, handle, lc);
	return a->n8 ? a->n8->listen(0, handle, lc) : a->n11->listen(NULL, 0, handle, lc);
}

ncclResult_t napi_net_connect(struct napi *a, void *handle, void **sc)
{
	ncclNetDeviceHandle_v8_t *dh = NULL;
	ncclNetCommConfig_v10_t cfg = {.trafficClass = -1};

	if (a->n7)
		return a->n7->connect(0, handle, sc, &dh);
	if (a->n9)
		return a->n9->connect(0, handle, sc, &dh);
	if (a->n10)
		return a->n10->connect(0, &cfg, handle, sc, &dh);
	return a->n8 ? a->n8->connect(0, handle, sc, &dh)
		     : a->n11->connect(NULL, 0, handle, sc, &dh);
}

ncclResult_t napi_net_accept(struct napi *a, void *lc, void **rc)
{
	ncclNetDeviceHandle_v8_t *dh = NULL;

	if (a->n7)
		return a->n7->accept(lc, rc, &dh);
	if (a->n9 || a->n10)
		return a->n9 ? a->n9->accept(lc, rc, &dh) : a->n10->accept(lc, rc, &dh);
	return a->n8 ? a->n8->accept(lc, rc, &dh) : a->n11->accept(lc, rc, &dh);
}

ncclResult_t napi_net_isend(struct napi *a, void *sc, void *d, size_t n, int tag, void **req)
{
	void *mh = NULL;
	ncclResult_t r;

	if (a->n7) {
		r = a->n7->regMr(sc, d, (int)n, NCCL_PTR_HOST, &mh);
		return r ? r : a->n7->isend(sc, d, (int)n, tag, mh, req);
	}
	if (a->n9 || a->n10) {
		r = a->n9 ? a->n9->regMr(sc, d, n, NCCL_PTR_HOST, &mh)
			  : a->n10->regMr(sc, d, n, NCCL_PTR_HOST, &mh);
		if (r)
			return r;
		return a->n9 ? a->n9->isend(sc, d, n, tag, mh, req)
			     : a->n10->isend(sc, d, n, tag, mh, NULL, req);
	}
	r = a->n8 ? a->n8->regMr(sc, d, n, NCCL_PTR_HOST, &mh)
		  : a->n11->regMr(sc, d, n, NCCL_PTR_HOST, &mh);
	if (r)
		return r;
	return a->n8 ? a->n8->isend(sc, d, (int)n, tag, mh, req)
		     : a->n11->isend(sc, d, n, tag, mh, NULL, req);
}

ncclResult_t napi_net_irecv(struct napi *a, void *rc, void *d, size_t n, int tag, void **req)
{
	void *mh = NULL;
	ncclResult_t r;
	int isz = (int)n;

	if (a->n7) {
		r = a->n7->regMr(rc, d, isz, NCCL_PTR_HOST, &mh);
		return r ? r : a->n7->irecv(rc, 1, &d, &isz, &tag, &mh, req);
	}
	if (a->n9 || a->n10) {
		r = a->n9 ? a->n9->regMr(rc, d, n, NCCL_PTR_HOST, &mh)
			  : a->n10->regMr(rc, d, n, NCCL_PTR_HOST, &mh);
		if (r)
			return r;
		return a->n9 ? a->n9->irecv(rc, 1, &d, &n, &tag, &mh, req)
			     : a->n10->irecv(rc, 1, &d, &n, &tag, &mh, NULL, req);
	}
	r = a->n8 ? a->n8->regMr(rc, d, n, NCCL_PTR_HOST, &mh)
		  : a->n11->regMr(rc, d, n, NCCL_PTR_HOST, &mh);
	if (r)
		return r;
	return a->n8 ? a->n8->irecv(rc, 1, &d, &isz, &tag, &mh, req)
		     : a->n11->irecv(rc, 1, &d, &n, &tag, &mh, NULL, req);
}

ncclResult_t napi_net_test(struct napi *a, void *req, int *done, int *size)
{
	if (a->n7)
		return a->n7->test(req, done, size);
	if (a->n9 || a->n10)
		return a->n9 ? a->n9->test(req, done, size) : a->n10->test(req, done, size);
	return a->n8 ? a->n8->test(req, done, size) : a->n11->test(req, done, size);
}

ncclResult_t napi_net_close(struct napi *a, void *sc, void *rc, void *lc)
{
	if (a->n7) {
		if (sc) a->n7->closeSend(sc);
		if (rc) a->n7->closeRecv(rc);
		if (lc) a->n7->closeListen(lc);
		return ncclSuccess;
	}
	if (a->n9 || a->n10) {
		const ncclNet_v9_t *t9 = a->n9;
		const ncclNet_v10_t *t10 = a->n10;

		if (sc) t9 ? t9->closeSend(sc) : t10->closeSend(sc);
		if (rc) t9 ? t9->closeRecv(rc) : t10->closeRecv(rc);
		if (lc) t9 ? t9->closeListen(lc) : t10->closeListen(lc);
		return ncclSuccess;
	}
	if (a->n8) {
		if (sc) a->n8->closeSend(sc);
		if (rc) a->n8->closeRecv(rc);
		if (lc) a->n8->closeListen(lc);
		return ncclSuccess;
	}
	if (sc) a->n11->closeSend(sc);
	if (rc) a->n11->closeRecv(rc);
	if (lc) a->n11->closeListen(lc);
	return a->n11->finalize(NULL);
}

ncclResult_t napi_coll_init(struct napi *a)
{
	void *ctx;

	if (a->c7)
		return a->c7->init(napi_logger);
	if (a->c10)
		return a->c10->init(napi_logger);
	return a->c8 ? a->c8->init(napi_logger) : a->c11->init(&ctx, 1, napi_logger);
}

ncclResult_t napi_coll_devices(struct napi *a, int *n, int *ptr_support)
{
	ncclResult_t r = a->c7 ? a->c7->devices(n) : a->c10 ? a->c10->devices(n) : a->c8 ? a->c8->devices(n)
						: a->c11->devices(n);

	if (r || *n < 1)
		return r;
	if (a->c7) {
		ncclNetProperties_v7_t p;

		r = a->c7->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
	} else if (a->c10) {
		ncclNetProperties_v10_t p;

		r = a->c10->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
	} else if (a->c8) {
		ncclNetProperties_v8_t p;

		r = a->c8->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
	} else {
		ncclNetProperties_v11_t p;

		r = a->c11->getProperties(0, &p);
		*ptr_support = p.ptrSupport;
	}
	return r;
}

ncclResult_t napi_coll_listen(struct napi *a, void *handle, void **lc)
{
	if (a->c7)
		return a->c7->listen(0, handle, lc);
	if (a->c10)
		return a->c10->listen(0, handle, lc);
	return a->c8 ? a->c8->listen(0, handle, lc) : a->c11->listen(NULL, 0, handle, lc);
}

ncclResult_t napi_coll_connect(struct napi *a, void **handles, int n, int rank, void *lc,
			       void **cc)
{
	if (a->c7)
		return a->c7->connect(handles, n, rank, lc, cc);
	if (a->c10)
		return a->c10->connect(handles, n, rank, lc, cc);
	return a->c8 ? a->c8->connect(handles, n, rank, lc, cc)
		     : a->c11->connect(handles, n, rank, lc, cc);
}

ncclResult_t napi_coll_support(struct napi *a, ncclDataType_t dt, ncclRedOp_t op, int *s)
{
	if (a->c7)
		return a->c7->reduceSupport(dt, op, s);
	if (a->c10)
		return a->c10->reduceSupport(dt, op, s);
	return a->c8 ? a->c8->reduceSupport(dt, op, s) : a->c11->reduceSupport(dt, op, s);
}

ncclResult_t napi_coll_regmr(struct napi *a, void *cc, void *d, size_t n, void **mh)
{
	if (a->c7)
		return a->c7->regMr(cc, d, (int)n, NCCL_PTR_HOST, mh);
	if (a->c10)
		return a->c10->regMr(cc, d, n, NCCL_PTR_HOST, mh);
	return a->c8 ? a->c8->regMr(cc, d, n, NCCL_PTR_HOST, mh)
		     : a->c11->regMr(cc, d, n, NCCL_PTR_HOST, mh);
}

ncclResult_t napi_coll_deregmr(struct napi *a, void *cc, void *mh)
{
	if (a->c7)
		return a->c7->deregMr(cc, mh);
	if (a->c10)
		return a->c10->deregMr(cc, mh);
	return a->c8 ? a->c8->deregMr(cc, mh) : a->c11->deregMr(cc, mh);
}

ncclResult_t napi_coll_iallreduce(struct napi *a, void *cc, void *s, void *r, size_t count,
				  ncclDataType_t dt, void *smh, void *rmh, void **req)
{
	if (a->c7)
		return a->c7->iallreduce(cc, s, r, (int)count, dt, ncclSum, smh, rmh, req);
	if (a->c10)
		return a->c10->iallreduce(cc, s, r, count, dt, ncclSum, smh, rmh, req);
	return a->c8 ? a->c8->iallreduce(cc, s, r, (int)count, dt, ncclSum, smh, rmh, req)
		     : a->c11->iallreduce(cc, s, r, count, dt, ncclSum, smh, rmh, req);
}

ncclResult_t napi_coll_iallgather(struct napi *a, void *cc, void *send, void *win, size_t bpr,
				  size_t woff, size_t wbytes, void *smh, void *wmh, void **req)
{
	ncclNetSGE_v8_t p8 = {wmh, win, (uint32_t)wbytes};
	ncclNetSGE_v10_t p10 = {wmh, win, wbytes};
	ncclNetSGE_v11_t p11 = {wmh, win, wbytes};

	if (a->c7)
		return ncclInvalidUsage; /* v7 has no iallgather */
	if (a->c10)
		return a->c10->iallgather(cc, send, 1, &p10, bpr, woff, wbytes, smh, req);
	return a->c8 ? a->c8->iallgather(cc, send, 1, &p8, bpr, woff, wbytes, smh, req)
		     : a->c11->iallgather(cc, send, 1, &p11, bpr, woff, wbytes, smh, req);
}

ncclResult_t napi_coll_ireducescatter(struct napi *a, void *cc, void *win, void *recv, size_t bpr,
				      size_t woff, size_t wbytes, ncclDataType_t dt, void *wmh,
				      void *rmh, void **req)
{
	ncclNetSGE_v8_t p8 = {wmh, win, (uint32_t)wbytes};
	ncclNetSGE_v10_t p10 = {wmh, win, wbytes};
	ncclNetSGE_v11_t p11 = {wmh, win, wbytes};

	if (a->c7)
		return ncclInvalidUsage; /* v7 has no ireducescatter */
	if (a->c10)
		return a->c10->ireducescatter(cc, 1, &p10, recv, bpr, woff, wbytes, dt, ncclSum, rmh,
					      req);
	return a->c8 ? a->c8->ireducescatter(cc, 1, &p8, recv, bpr, woff, wbytes, dt, ncclSum, rmh,
					     req)
		     : a->c11->ireducescatter(cc, 1, &p11, recv, bpr, woff, wbytes, dt, ncclSum,
					      rmh, req);
}

ncclResult_t napi_coll_test(struct napi *a, void *req, int *done, int *size)
{
	if (a->c7)
		return a->c7->test(req, done, size);
	if (a->c10)
		return a->c10->test(req, done, size);
	return a->c8 ? a->c8->test(req, done, size) : a->c11->test(req, done, size);
}

ncclResult_t napi_coll_close(struct napi *a, void *cc, void *lc)
{
	if (a->c7) {
		if (cc) a->c7->closeColl(cc);
		if (lc) a->c7->closeListen(lc);
		return ncclSuccess;
	}
	if (a->c10) {
		if (cc) a->c10->closeColl(cc);
		if (lc) a->c10->closeListen(lc);
		return ncclSuccess;
	}
	if (a->c8) {
		if (cc) a->c8->closeColl(cc);
		if (lc) a->c8->closeListen(lc);
		return ncclSuccess;
	}
	if (cc) a->c11->closeColl(cc);
	if (lc) a->c11->closeListen(lc);
	return a->c11->finalize(NULL);
}
