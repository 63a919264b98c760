/*
 * det_auth.c — the master's one token system. Its own token (master.c writes it to
 * master.token with m_random_hex; needed by every request unless bound to loopback,
 * m_loopback) and login tokens, as the reference platform has them on a fresh install: users
 * `determined` and `admin` log in with the empty password (on a master bound beyond loopback,
 * with the master's token as the password) and get a new token (64 hex digits) kept in the
 * store's auth_tokens table, so it outlives a restart; logout forgets it. http.c accepts a
 * login token wherever it accepts the master's token (http.h token_ok), and the reference's
 * routes accept the master's token: two ways to get a token, one system.
 */
#include "det_impl.h"

#include "master/det_pack.h"
#include "master/store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

dt_status m_random_hex(char *buf) {
    unsigned char raw[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
    if (fd >= 0) close(fd);
    if (r != (ssize_t)sizeof raw)
        return dt_error(DT_ERR_IO, "cannot read /dev/urandom: %s", strerror(errno));
    for (size_t i = 0; i < sizeof raw; i++) sprintf(buf + 2 * i, "%02x", raw[i]);
    return DT_OK;
}

bool m_loopback(const char *host) {
    return !strcmp(host, "127.0.0.1") || !strcmp(host, "::1") || !strcmp(host, "localhost");
}

static const char *const USERS[] = {"determined", "admin"};

/* Run one statement binding `a` (and `b` when not NULL) in a store group; a row's first
 * column into out (n bytes) when out. DT_OK with *found. */
static dt_status token_sql(dt_store *st, const char *sql, const char *a, const char *b, char *out,
                           size_t n, bool *found) {
    *found = false;
    dt_status status = dt_store_begin(st);
    if (status != DT_OK) return status;
    sqlite3 *db = dt__store_db(st);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(s, 1, a, -1, SQLITE_STATIC);
        if (b) sqlite3_bind_text(s, 2, b, -1, SQLITE_STATIC);
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            *found = true;
            if (out) snprintf(out, n, "%s", (const char *)sqlite3_column_text(s, 0));
            rc = SQLITE_DONE;
        } else if (rc == SQLITE_DONE) {
            *found = sqlite3_changes(db) > 0 && !out;
        }
    }
    if (rc != SQLITE_DONE) status = dt__store_sqlite_error(db, rc, "(the store)", "login tokens");
    sqlite3_finalize(s);
    if (status != DT_OK) {
        DT_KEEP_ERROR(dt_store_rollback(st));
        return status;
    }
    return dt_store_commit(st);
}

/* The reference's client hashes a non-empty password: hex SHA-512 of this salt + password. */
#define CLIENT_SALT "GubPEmmotfiK9TMD6Zdw"

/* Equal strings, in time independent of where they differ. */
static bool same(const char *a, const char *ref) {
    size_t len = strlen(ref);
    unsigned char d = strlen(a) != len;
    for (size_t i = 0; i < len && a[i]; i++) d |= (unsigned char)(a[i] ^ ref[i]);
    return !d;
}

/* Is `password` (as the client sent it: hashed or not) the master's token? */
static bool is_master_token(const master *m, const char *password, bool hashed) {
    char salted[128], want[129];
    int n = snprintf(salted, sizeof salted, "%s%s", CLIENT_SALT, m->token);
    dt__sha512_hex(salted, (size_t)n, want);
    return same(password, hashed ? want : m->token);
}

dt_status m_det_login(master *m, const char *user, const char *password, bool hashed, char *token) {
    bool known = false;
    for (size_t i = 0; user && i < sizeof USERS / sizeof *USERS; i++)
        known |= !strcmp(user, USERS[i]);
    /* on loopback the empty password, as on a fresh install of the reference; reachable from
     * elsewhere only the master's token opens it (else anyone could log in) */
    bool ok = known && password &&
              (m_loopback(m->o.host) ? !*password : is_master_token(m, password, hashed));
    if (!ok)
        return dt_error(DT_ERR_INVALID,
                        m_loopback(m->o.host)
                            ? "invalid credentials; hint: this master has the users determined "
                              "and admin, with the empty password"
                            : "invalid credentials; hint: this master is reachable beyond "
                              "loopback: log in with the master's token as the password (dtrain "
                              "master token prints it)");
    dt_status st = m_random_hex(token);
    if (st != DT_OK) return st;
    bool done;
    return token_sql(m->store,
                     "INSERT INTO auth_tokens (token, username, time) VALUES (?1, ?2, "
                     "strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                     token, user, NULL, 0, &done);
}

bool m_det_token_user(master *m, const char *token, char *user, size_t n) {
    bool found = false;
    if (!token || strlen(token) != 64) return false;
    dt_status st = token_sql(m->store, "SELECT username FROM auth_tokens WHERE token = ?1", token,
                             NULL, user, n, &found);
    if (st != DT_OK) dt_clear_error();
    return st == DT_OK && found;
}

dt_status m_det_logout(master *m, const char *token) {
    bool done;
    return token_sql(m->store, "DELETE FROM auth_tokens WHERE token = ?1", token, NULL, NULL, 0,
                     &done);
}

bool m_det_token_ok(void *app, const char *token) {
    char user[64];
    return m_det_token_user(app, token, user, sizeof user);
}

bool m_det_session(master *m, const dt_http_req *req) {
    return m_det_token_ok(m, dt_http_bearer(req));
}

bool m_det_token_valid(master *m, const char *t) {
    return t && (same(t, m->token) || m_det_token_ok(m, t));
}
