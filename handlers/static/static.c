/* The static handler: files that no [handlers] extension claims, sent from
 * their descriptor (sendfile) with a Content-Type from the system's
 * mime.types. */
#include "handler.h"
#include "log.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int static_handle(struct plxd_request *r)
{
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
		return plxd_respond_error(r, 405);
	if (r->path_info[0] != '\0' || !S_ISREG(r->st.st_mode))
		return plxd_respond_error(r, 404);
	int fd = dup(r->fd);
	if (fd < 0)
		return plxd_respond_error(r, 500);
	struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)r->st.st_size, fd);
	if (!resp) {
		close(fd);
		return plxd_respond_error(r, 500);
	}
	r->bytes_sent = (uint64_t)r->st.st_size;
	return plxd_respond(r, 200, resp);
}

const struct plxd_handler static_handler = {
	.abi = PLXD_HANDLER_ABI,
	.name = "static",
	.keys = (const struct conf_key[]){ CONF_KEYS_END },
	.conf_size = 1,
	.handle = static_handle,
};
