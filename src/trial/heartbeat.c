/* heartbeat.c — dt_core_heartbeat (dtrain/core.h): "this run is alive", sent by the fit loop
 * between steps and during long validations, and by a hand-written loop through the Core API.
 *
 * A run that stops sending (a deadlock, a collective that never completes, a step that never
 * returns) is killed by the master once it has been silent for its experiment's
 * resources.max_silence, and restarted from its latest checkpoint. A heartbeat is therefore
 * sent by the thread that trains, never by a thread of its own, which would go on beating
 * while the training hangs. It costs a clock read per call; the implementation's operation
 * (an HTTP call to the master) runs at most every core->heartbeat_s. */
#include "dtrain/core.h"

void dt_core_heartbeat(dt_core *core) {
    if (!core || !core->ops || !core->ops->heartbeat || core->heartbeat_s <= 0) return;
    double now = dt_now_sec();
    if (now < core->heartbeat_next) return;
    core->heartbeat_next = now + core->heartbeat_s;
    core->ops->heartbeat(core);
}
