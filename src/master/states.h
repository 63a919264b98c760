/* states.h — experiment and trial states: enums inside the master, names (as stored and
 * answered) only at the edges; states.c holds the names and the transition table. */
#ifndef DTRAIN_MASTER_STATES_H
#define DTRAIN_MASTER_STATES_H

#include <jansson.h>
#include <stdbool.h>

typedef enum {
    M_ACTIVE,
    M_PAUSED,
    M_STOPPING_COMPLETED,
    M_STOPPING_CANCELED,
    M_STOPPING_KILLED,
    M_STOPPING_ERROR,
    M_COMPLETED,
    M_CANCELED,
    M_ERROR,
    M_DELETING,
    M_N_STATES
} m_state;
typedef enum { M_ACT_PAUSE, M_ACT_ACTIVATE, M_ACT_CANCEL, M_ACT_KILL, M_N_ACTIONS } m_action;

const char *m_state_name(m_state s); /* "ACTIVE", ... as stored and answered */
bool m_state_parse(const char *name, m_state *out);
m_state m_state_of(const char *name);    /* a stored name; M_ERROR for one it does not know */
bool m_state_terminal(m_state s);        /* COMPLETED, CANCELED, ERROR, DELETING */
bool m_state_stopping(m_state s);        /* STOPPING_* */
m_state m_state_ended(m_state stopping); /* the terminal state a STOPPING_* one ends in */
const char *m_action_name(m_action a);
bool m_action_parse(const char *name, m_action *out);
bool m_action_allowed(m_state s, m_action a);            /* the transition table of states.c */
bool m_action_moves(m_state s, m_action a, m_state *to); /* false: refused or nothing to do */
json_t *m_actions_json(m_state s); /* the actions that change state s, for the UI */

/* A checkpoint's state: COMPLETED (its files are there) or DELETED (GC or a user removed them). */
typedef enum { M_CKPT_COMPLETED, M_CKPT_DELETED, M_N_CKPT_STATES } m_ckpt_state;
const char *m_ckpt_state_name(m_ckpt_state s);
bool m_ckpt_state_parse(const char *name, m_ckpt_state *out);
/* True when a stored checkpoint row's state (NULL: an old row) says its files are there. */
bool m_ckpt_state_usable(const char *name);

#endif
