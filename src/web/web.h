/*
 * web/web.h — the web UI the master serves (docs/webui.md): HTML pages for experiments and
 * trials, their charts, and the embedded CSS, JS and chart libraries, all over the REST API.
 *
 * The routes are handed to the master by its caller (dt_master_opts.routes), so the master
 * layer never depends on the web layer above it.
 */
#ifndef DTRAIN_WEB_H
#define DTRAIN_WEB_H

#include "master/master.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The web UI's routes (a static table) and their count in *n. */
DT_API const struct dt_http_route *dt_web_routes(int *n);

#ifdef __cplusplus
}
#endif
#endif
