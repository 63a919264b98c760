/* test_states.c — the experiment state machine (src/master/states.c): names round-trip, the
 * terminal and stopping sets, and every (state, action) pair against a table written from
 * Determined's rules in docs/experiments.md, so a change to the table shows up here. */
#include "master/states.h"
#include "test.h"

#include <string.h>

static void test_names(void) {
    for (int s = 0; s < M_N_STATES; s++) {
        m_state back = M_N_STATES;
        CHECK(m_state_parse(m_state_name((m_state)s), &back) && back == (m_state)s);
    }
    m_state x;
    CHECK(!m_state_parse("active", &x)); /* names are exact: stored upper case */
    CHECK(!m_state_parse(NULL, &x));
    CHECK(m_state_of("NOT_A_STATE") == M_ERROR);
    CHECK(!strcmp(m_state_name(M_STOPPING_KILLED), "STOPPING_KILLED"));
    for (int a = 0; a < M_N_ACTIONS; a++) {
        m_action back = M_N_ACTIONS;
        CHECK(m_action_parse(m_action_name((m_action)a), &back) && back == (m_action)a);
    }
    m_action a;
    CHECK(!m_action_parse("delete", &a));
    m_ckpt_state c;
    CHECK(m_ckpt_state_parse("DELETED", &c) && c == M_CKPT_DELETED);
    CHECK(m_ckpt_state_usable(NULL) && m_ckpt_state_usable("COMPLETED"));
    CHECK(!m_ckpt_state_usable("DELETED") && !m_ckpt_state_usable("junk"));
}

static void test_sets(void) {
    for (int s = 0; s < M_N_STATES; s++) {
        bool terminal = s == M_COMPLETED || s == M_CANCELED || s == M_ERROR || s == M_DELETING;
        bool stopping = !strncmp(m_state_name((m_state)s), "STOPPING_", 9);
        CHECK_MSG(m_state_terminal((m_state)s) == terminal, "%s", m_state_name((m_state)s));
        CHECK_MSG(m_state_stopping((m_state)s) == stopping, "%s", m_state_name((m_state)s));
    }
    CHECK(m_state_ended(M_STOPPING_COMPLETED) == M_COMPLETED);
    CHECK(m_state_ended(M_STOPPING_ERROR) == M_ERROR);
    CHECK(m_state_ended(M_STOPPING_CANCELED) == M_CANCELED);
    CHECK(m_state_ended(M_STOPPING_KILLED) == M_CANCELED);
}

/* (state, action) -> expected: 'r' refused, 's' allowed with nothing to do, else the target */
typedef struct {
    m_state from;
    m_action act;
    char kind;
    m_state to;
} move;

static void test_moves(void) {
    static const move allowed[] = {
        {M_ACTIVE, M_ACT_PAUSE, 'm', M_PAUSED},
        {M_ACTIVE, M_ACT_ACTIVATE, 's', 0},
        {M_ACTIVE, M_ACT_CANCEL, 'm', M_STOPPING_CANCELED},
        {M_ACTIVE, M_ACT_KILL, 'm', M_STOPPING_KILLED},
        {M_PAUSED, M_ACT_PAUSE, 's', 0},
        {M_PAUSED, M_ACT_ACTIVATE, 'm', M_ACTIVE},
        {M_PAUSED, M_ACT_CANCEL, 'm', M_STOPPING_CANCELED},
        {M_PAUSED, M_ACT_KILL, 'm', M_STOPPING_KILLED},
        {M_STOPPING_CANCELED, M_ACT_KILL, 'm', M_STOPPING_KILLED},
    };
    int n_allowed = (int)(sizeof allowed / sizeof *allowed), seen = 0;
    for (int s = 0; s < M_N_STATES; s++)
        for (int a = 0; a < M_N_ACTIONS; a++) {
            const move *want = NULL;
            for (int i = 0; i < n_allowed; i++)
                if (allowed[i].from == (m_state)s && allowed[i].act == (m_action)a)
                    want = &allowed[i];
            m_state to = M_N_STATES;
            bool moves = m_action_moves((m_state)s, (m_action)a, &to);
            CHECK_MSG(m_action_allowed((m_state)s, (m_action)a) == (want != NULL), "%s %s",
                      m_state_name((m_state)s), m_action_name((m_action)a));
            CHECK_MSG(moves == (want && want->kind == 'm') && (!moves || to == want->to), "%s %s",
                      m_state_name((m_state)s), m_action_name((m_action)a));
            seen += want != NULL;
        }
    CHECK(seen == n_allowed);
    /* the UI offers exactly the actions that change the state */
    json_t *completed = m_actions_json(M_COMPLETED), *active = m_actions_json(M_ACTIVE);
    CHECK(json_array_size(completed) == 0);
    CHECK(json_array_size(active) == 3); /* pause, cancel, kill */
    json_decref(completed);
    json_decref(active);
}

int main(void) {
    TEST_RUN(test_names);
    TEST_RUN(test_sets);
    TEST_RUN(test_moves);
    TEST_END();
}
