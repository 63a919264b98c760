/* builtin.c — the built-in search methods by the name a config gives (single, random, grid,
 * adaptive_asha), each wrapped in the driver (search.c) as a user's custom method is. The
 * methods call the driver; the driver knows none of them. */
#include "search_impl.h"

#include <string.h>

dt_status dt_searcher_new(const dt_expconf *cfg, uint64_t seed, dt_searcher **out) {
    *out = NULL;
    static const struct {
        const char *name;
        dt_status (*make)(const dt_expconf *, dt_search_method *);
    } builtin[] = {{"single", dt__search_single_new},
                   {"random", dt__search_random_new},
                   {"grid", dt__search_grid_new},
                   {"adaptive_asha", dt__search_asha_new},
                   {"async_halving", dt__search_asha_new}};
    const char *name = cfg && cfg->searcher.name ? cfg->searcher.name : "single";
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        if (strcmp(name, builtin[i].name)) continue;
        dt_search_method m = {0};
        dt_status st = builtin[i].make(cfg, &m);
        if (st) return st;
        st = dt_searcher_new_custom(cfg, seed, &m, out);
        if (st && m.free) DT_KEEP_ERROR(m.free(m.state));
        return st;
    }
    if (!strcmp(name, "custom"))
        return dt_error(DT_ERR_CONFIG,
                        "searcher 'custom' runs a search method given in C; hint: build it with "
                        "dt_searcher_new_custom, or use single, random, grid or adaptive_asha");
    return dt_error(
        DT_ERR_CONFIG,
        "unknown searcher '%s'; hint: use single, random, grid, adaptive_asha, async_halving or "
        "custom",
        name);
}
