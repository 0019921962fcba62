/* SPDX-License-Identifier: Apache-2.0
 * ctl_rpc.c — JSON-RPC 2.0 request handling (single and batch) over a backend, and config
 * file replay through the same path.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tally_ctl.h"

json_t *tally_ctl_error(const json_t *id, int code, const char *message, const json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message ? message : "");

	if (!err)
		return NULL;
	if (data)
		json_object_set(err, "data", (json_t *)data);
	return json_pack("{s:s, s:o, s:O}", "jsonrpc", "2.0", "error", err, "id",
			 id ? (json_t *)id : json_null());
}

static json_t *errno_data(int e)
{
	return json_pack("{s:i, s:s}", "errno", e, "name", strerrorname_np(e) ? strerrorname_np(e)
									     : "?");
}

/* Runs one validated call; returns 0 and *result, or a JSON-RPC code with msg. */
static int call_method(const struct tally_ctl_backend *b, const struct tally_ctl_method *m,
		       const json_t *params, json_t **result, int *err_no, char *msg,
		       size_t msglen)
{
	tally_ctl_handler_fn fn = b->handlers[m->id];
	json_t *checked;
	int rc;

	*err_no = 0;
	if (!fn) {
		snprintf(msg, msglen, "%s is not implemented by this appliance", m->name);
		return TALLY_CTL_E_NOT_IMPLEMENTED;
	}
	checked = tally_ctl_params_check(m, params, msg, msglen);
	if (!checked)
		return TALLY_CTL_E_INVALID_PARAMS;
	*result = NULL;
	msg[0] = '\0';
	rc = fn(b->ctx, checked, result, msg, msglen);
	json_decref(checked);
	if (rc == 0) {
		if (!*result)
			*result = json_null();
		return 0;
	}
	json_decref(*result);
	*result = NULL;
	*err_no = rc < 0 ? -rc : EIO;
	if (!msg[0])
		snprintf(msg, msglen, "%s failed: %s", m->name, strerror(*err_no));
	return rc == -EINVAL ? TALLY_CTL_E_INVALID_PARAMS : TALLY_CTL_E_APPLIANCE;
}

static json_t *handle_one(const struct tally_ctl_backend *b, const json_t *req)
{
	const json_t *id, *method, *ver, *params;
	const struct tally_ctl_method *m;
	json_t *result = NULL, *resp, *data;
	char msg[512];
	int code, e;

	if (!json_is_object(req))
		return tally_ctl_error(NULL, TALLY_CTL_E_INVALID_REQUEST,
				       "a request must be a JSON object", NULL);
	id = json_object_get(req, "id");
	ver = json_object_get(req, "jsonrpc");
	method = json_object_get(req, "method");
	params = json_object_get(req, "params");
	if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id))
		return tally_ctl_error(NULL, TALLY_CTL_E_INVALID_REQUEST,
				       "id must be a string, an integer or null", NULL);
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
		return tally_ctl_error(id, TALLY_CTL_E_INVALID_REQUEST,
				       "jsonrpc must be \"2.0\"", NULL);
	if (!json_is_string(method))
		return tally_ctl_error(id, TALLY_CTL_E_INVALID_REQUEST,
				       "method must be a string", NULL);
	m = tally_ctl_method_by_name(json_string_value(method));
	if (!m) {
		snprintf(msg, sizeof(msg), "method '%.200s' not found", json_string_value(method));
		resp = tally_ctl_error(id, TALLY_CTL_E_METHOD_NOT_FOUND, msg, NULL);
		goto out;
	}
	code = call_method(b, m, params, &result, &e, msg, sizeof(msg));
	if (code == 0) {
		resp = json_pack("{s:s, s:o, s:O}", "jsonrpc", "2.0", "result", result, "id",
				 id ? (json_t *)id : json_null());
	} else {
		data = e ? errno_data(e) : NULL;
		resp = tally_ctl_error(id, code, msg, data);
		json_decref(data);
	}
out:
	if (!id) { /* notification: no answer */
		json_decref(resp);
		return NULL;
	}
	return resp;
}

json_t *tally_ctl_handle(const struct tally_ctl_backend *b, const json_t *msg)
{
	json_t *out, *r;
	size_t i;
	const json_t *req;

	if (!json_is_array(msg))
		return handle_one(b, msg);
	if (json_array_size(msg) == 0)
		return tally_ctl_error(NULL, TALLY_CTL_E_INVALID_REQUEST, "empty batch", NULL);
	out = json_array();
	json_array_foreach(msg, i, req) {
		r = handle_one(b, req);
		if (r)
			json_array_append_new(out, r);
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

int tally_ctl_replay(const struct tally_ctl_backend *b, const json_t *doc, char *msg,
		     size_t msglen)
{
	const json_t *calls = json_object_get(doc, "calls"), *c;
	size_t i;
	char emsg[400];

	if (!json_is_object(doc) || !json_is_array(calls)) {
		snprintf(msg, msglen, "config: expected {\"calls\": [...]}");
		return -EINVAL;
	}
	json_array_foreach(calls, i, c) {
		const json_t *method = json_object_get(c, "method");
		const struct tally_ctl_method *m;
		json_t *result = NULL;
		int e, code;

		if (!json_is_object(c) || !json_is_string(method)) {
			snprintf(msg, msglen, "config: call %zu: expected {\"method\": ..., "
				 "\"params\": {...}}", i);
			return -EINVAL;
		}
		m = tally_ctl_method_by_name(json_string_value(method));
		if (!m || !m->replayable) {
			snprintf(msg, msglen, "config: call %zu: method '%.100s' %s", i,
				 json_string_value(method),
				 m ? "cannot appear in a config file" : "not found");
			return -EINVAL;
		}
		code = call_method(b, m, json_object_get(c, "params"), &result, &e, emsg,
				   sizeof(emsg));
		json_decref(result);
		if (code) {
			snprintf(msg, msglen, "config: call %zu (%s): %s", i, m->name, emsg);
			return e ? -e : -EINVAL;
		}
	}
	return 0;
}

int tally_ctl_replay_file(const struct tally_ctl_backend *b, const char *path, char *msg,
			  size_t msglen)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	int rc;

	if (!doc) {
		snprintf(msg, msglen, "config %s: line %d column %d: %s", path, jerr.line,
			 jerr.column, jerr.text);
		return -EINVAL;
	}
	rc = tally_ctl_replay(b, doc, msg, msglen);
	json_decref(doc);
	return rc;
}
