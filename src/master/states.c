/* states.c — the experiment and trial state machine: names at the edges (store, JSON, UI),
 * enums inside, and one table of the moves a user's action makes (docs/experiments.md). */
#include "states.h"

#include <string.h>

static const char *const NAMES[M_N_STATES] = {
    [M_ACTIVE] = "ACTIVE",
    [M_PAUSED] = "PAUSED",
    [M_STOPPING_COMPLETED] = "STOPPING_COMPLETED",
    [M_STOPPING_CANCELED] = "STOPPING_CANCELED",
    [M_STOPPING_KILLED] = "STOPPING_KILLED",
    [M_STOPPING_ERROR] = "STOPPING_ERROR",
    [M_COMPLETED] = "COMPLETED",
    [M_CANCELED] = "CANCELED",
    [M_ERROR] = "ERROR",
    [M_DELETING] = "DELETING",
};

static const char *const ACTIONS[M_N_ACTIONS] = {
    [M_ACT_PAUSE] = "pause",
    [M_ACT_ACTIVATE] = "activate",
    [M_ACT_CANCEL] = "cancel",
    [M_ACT_KILL] = "kill",
};

/* What each action does from each state: the state it moves the experiment to, M_SAME when it
 * is already done (pausing a paused experiment), M_REFUSED when the state does not allow it.
 * Determined's rules: pause and activate swap ACTIVE and PAUSED; cancel stops a live
 * experiment letting its trials checkpoint; kill stops one at once, and also hurries a cancel
 * already under way. A stopping or ended experiment takes no other action. */
enum { M_SAME = -1, M_REFUSED = -2 };
static const int MOVES[M_N_STATES][M_N_ACTIONS] = {
    [M_ACTIVE] = {M_PAUSED, M_SAME, M_STOPPING_CANCELED, M_STOPPING_KILLED},
    [M_PAUSED] = {M_SAME, M_ACTIVE, M_STOPPING_CANCELED, M_STOPPING_KILLED},
    [M_STOPPING_COMPLETED] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_STOPPING_CANCELED] = {M_REFUSED, M_REFUSED, M_REFUSED, M_STOPPING_KILLED},
    [M_STOPPING_KILLED] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_STOPPING_ERROR] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_COMPLETED] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_CANCELED] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_ERROR] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
    [M_DELETING] = {M_REFUSED, M_REFUSED, M_REFUSED, M_REFUSED},
};

const char *m_state_name(m_state s) {
    return s >= 0 && s < M_N_STATES ? NAMES[s] : "UNKNOWN";
}

bool m_state_parse(const char *name, m_state *out) {
    for (int i = 0; name && i < M_N_STATES; i++)
        if (!strcmp(name, NAMES[i])) return *out = (m_state)i, true;
    return false;
}

m_state m_state_of(const char *name) {
    m_state s;
    return m_state_parse(name, &s) ? s : M_ERROR;
}

bool m_state_terminal(m_state s) {
    return s == M_COMPLETED || s == M_CANCELED || s == M_ERROR || s == M_DELETING;
}

bool m_state_stopping(m_state s) {
    return s == M_STOPPING_COMPLETED || s == M_STOPPING_CANCELED || s == M_STOPPING_KILLED ||
           s == M_STOPPING_ERROR;
}

bool m_state_live(m_state s) {
    return !m_state_terminal(s);
}

m_state m_state_ended(m_state stopping) {
    switch (stopping) {
    case M_STOPPING_COMPLETED:
        return M_COMPLETED;
    case M_STOPPING_ERROR:
        return M_ERROR;
    default:
        return M_CANCELED;
    }
}

const char *m_action_name(m_action a) {
    return a >= 0 && a < M_N_ACTIONS ? ACTIONS[a] : "unknown";
}

bool m_action_parse(const char *name, m_action *out) {
    for (int i = 0; name && i < M_N_ACTIONS; i++)
        if (!strcmp(name, ACTIONS[i])) return *out = (m_action)i, true;
    return false;
}

bool m_action_allowed(m_state s, m_action a) {
    return s >= 0 && s < M_N_STATES && a >= 0 && a < M_N_ACTIONS && MOVES[s][a] != M_REFUSED;
}

bool m_action_moves(m_state s, m_action a, m_state *to) {
    if (!m_action_allowed(s, a) || MOVES[s][a] == M_SAME) return false;
    *to = (m_state)MOVES[s][a];
    return true;
}

json_t *m_actions_json(m_state s) {
    json_t *list = json_array();
    for (int a = 0; list && a < M_N_ACTIONS; a++)
        if (MOVES[s][a] >= 0) json_array_append_new(list, json_string(ACTIONS[a]));
    return list;
}

/* ---- checkpoints ---- */

static const char *const CKPT_NAMES[M_N_CKPT_STATES] = {
    [M_CKPT_COMPLETED] = "COMPLETED",
    [M_CKPT_DELETED] = "DELETED",
};

const char *m_ckpt_state_name(m_ckpt_state s) {
    return s >= 0 && s < M_N_CKPT_STATES ? CKPT_NAMES[s] : "UNKNOWN";
}

bool m_ckpt_state_parse(const char *name, m_ckpt_state *out) {
    for (int i = 0; name && i < M_N_CKPT_STATES; i++)
        if (!strcmp(name, CKPT_NAMES[i])) return *out = (m_ckpt_state)i, true;
    return false;
}

bool m_ckpt_state_usable(const char *name) {
    m_ckpt_state s;
    return !name || (m_ckpt_state_parse(name, &s) && s == M_CKPT_COMPLETED);
}
