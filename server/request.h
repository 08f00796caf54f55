/* One request's life on its connection (request.c): the callbacks the
 * engine (http.c) is started with, which route each request to its handler
 * and send its response. */
#ifndef PLXD_REQUEST_H
#define PLXD_REQUEST_H

#include <microhttpd.h>

struct loop;

/* libmicrohttpd's access handler: called for a request's head, for each
 * piece of its body and once more at its end. */
enum MHD_Result request_access(void *cls, struct MHD_Connection *connection, const char *url,
		const char *method, const char *version, const char *upload_data,
		size_t *upload_data_size, void **con_cls);

/* libmicrohttpd's completion callback: the request is over, answered or
 * not; its handler's finished() runs here. */
void request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
		enum MHD_RequestTerminationCode toe);

/* Ends every request of loop's thread that waits for its handler (or its
 * stream): at a stop, before the daemon is stopped. */
void request_abort_all(struct loop *loop);

#endif
