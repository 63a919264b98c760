/* test_output.c — the dtrain command's printer (src/cli/output.c): tables against plain lines
 * against JSON, long values, number / time / duration formats, metrics as CSV with missing
 * values. */
#include "cli/output.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* Print `t` in `mode` into a string (malloc'd). */
static char *printed(const dt_cli_table *t, dt_cli_mode mode, bool header) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    dt_cli_table_print(t, f, mode, header);
    fclose(f);
    return buf;
}

static dt_cli_table *sample(void) {
    const char *hdr[] = {"ID", "STATE", "BEST"};
    dt_cli_table *t = dt_cli_table_new(3, hdr);
    dt_cli_table_row(t);
    dt_cli_table_putf(t, "%d", 7);
    dt_cli_table_put(t, "COMPLETED");
    json_t *x = json_real(0.8651); /* reported as 0.8651: shown so, not 0.86509999999999998 */
    dt_cli_table_put_json(t, x);
    json_decref(x);
    dt_cli_table_row(t);
    dt_cli_table_putf(t, "%d", 12);
    dt_cli_table_put(t, "ACTIVE");
    dt_cli_table_put_json(t, NULL);
    return t;
}

static void test_table_aligned_with_header(void) {
    dt_cli_table *t = sample();
    char *s = printed(t, DT_CLI_TABLE, false);
    CHECK_MSG(!strcmp(s, "ID  STATE      BEST\n"
                         "7   COMPLETED  0.8651\n"
                         "12  ACTIVE     -\n"),
              "got:\n%s", s);
    free(s);
    dt_cli_table_free(t);
}

static void test_plain_tabs_no_header(void) {
    dt_cli_table *t = sample();
    char *s = printed(t, DT_CLI_PLAIN, false);
    CHECK_MSG(!strcmp(s, "7\tCOMPLETED\t0.8651\n12\tACTIVE\t-\n"), "got:\n%s", s);
    free(s);
    s = printed(t, DT_CLI_PLAIN, true);
    CHECK_MSG(!strncmp(s, "ID\tSTATE\tBEST\n7\t", 16), "header asked for, got:\n%s", s);
    free(s);
    dt_cli_table_free(t);
}

static void test_long_and_odd_values(void) {
    const char *hdr[] = {"K", "V"};
    dt_cli_table *t = dt_cli_table_new(2, hdr);
    char longv[201];
    memset(longv, 'x', 200);
    longv[200] = 0;
    dt_cli_table_row(t);
    dt_cli_table_put(t, "long");
    dt_cli_table_put(t, longv);
    dt_cli_table_row(t);
    dt_cli_table_put(t, "tab\tand\nbreak");
    json_t *o = json_pack("{s:i,s:[s,b]}", "hidden", 512, "opt", "adam", 1);
    dt_cli_table_put_json(t, o);
    json_decref(o);
    dt_cli_table_row(t);
    dt_cli_table_put(t, "h\xc3\xa9"); /* two characters, three bytes */
    dt_cli_table_put(t, NULL);

    char *s = printed(t, DT_CLI_TABLE, false);
    /* the long cell is cut to DT_CLI_MAX_CELL characters ending in "..." */
    char want[128];
    snprintf(want, sizeof want, "long           %.*s...\n", DT_CLI_MAX_CELL - 3, longv);
    CHECK_MSG(strstr(s, want) != NULL, "long cell not cut as expected:\n%s", s);
    CHECK(strstr(s, "tab and break  {\"hidden\":512,\"opt\":[\"adam\",true]}\n") != NULL);
    /* alignment counts characters, not bytes */
    CHECK_MSG(strstr(s, "\nh\xc3\xa9             -\n") != NULL, "utf-8 alignment:\n%s", s);
    free(s);

    /* plain lines keep every character and stay one line per row */
    s = printed(t, DT_CLI_PLAIN, false);
    CHECK(strstr(s, longv) != NULL);
    CHECK(strstr(s, "tab and break\t{") != NULL);
    int lines = 0;
    for (char *p = s; *p; p++) lines += *p == '\n';
    CHECK(lines == 3);
    free(s);
    dt_cli_table_free(t);
}

static void test_numbers(void) {
    char b[32];
    CHECK(!strcmp(dt_cli_fmt_number(0.1, DT_CLI_PLAIN, b, sizeof b), "0.1"));
    CHECK(!strcmp(dt_cli_fmt_number(0.1, DT_CLI_TABLE, b, sizeof b), "0.1"));
    CHECK(!strcmp(dt_cli_fmt_number(1e-7, DT_CLI_PLAIN, b, sizeof b), "1e-07"));
    CHECK(!strcmp(dt_cli_fmt_number(512.0, DT_CLI_TABLE, b, sizeof b), "512"));
    CHECK(!strcmp(dt_cli_fmt_number(0.35718393325805664, DT_CLI_TABLE, b, sizeof b),
                  "0.35718393325805664"));
    CHECK(!strcmp(dt_cli_fmt_number(0.003, DT_CLI_TABLE, b, sizeof b), "0.003"));
    double v = 0.35718393325805664;
    CHECK(strtod(dt_cli_fmt_number(v, DT_CLI_PLAIN, b, sizeof b), NULL) == v);
    CHECK(!strcmp(dt_cli_fmt_number(-1.0 / 0.0, DT_CLI_PLAIN, b, sizeof b), "-inf"));
}

static void test_times_and_durations(void) {
    char b[32];
    CHECK(!strcmp(dt_cli_fmt_duration(45.9, b, sizeof b), "45s"));
    CHECK(!strcmp(dt_cli_fmt_duration(185, b, sizeof b), "3m05s"));
    CHECK(!strcmp(dt_cli_fmt_duration(7380, b, sizeof b), "2h03m"));
    CHECK(!strcmp(dt_cli_fmt_duration(86400 + 3 * 3600 + 5, b, sizeof b), "1d03h"));
    CHECK(!strcmp(dt_cli_fmt_duration(-1, b, sizeof b), "-"));

    setenv("TZ", "UTC", 1);
    tzset();
    CHECK(!strcmp(dt_cli_fmt_time("2024-05-01T12:03:04Z", b, sizeof b), "2024-05-01 12:03:04"));
    CHECK(!strcmp(dt_cli_fmt_time("2024-05-01T12:03:04.250Z", b, sizeof b), "2024-05-01 12:03:04"));
    CHECK(!strcmp(dt_cli_fmt_time(NULL, b, sizeof b), "-"));
    CHECK(!strcmp(dt_cli_fmt_time("yesterday", b, sizeof b), "yesterday"));
    setenv("TZ", "UTC-2", 1); /* two hours east of UTC */
    tzset();
    CHECK(!strcmp(dt_cli_fmt_time("2024-05-01T23:30:00Z", b, sizeof b), "2024-05-02 01:30:00"));
    CHECK(!strcmp(dt_cli_fmt_span("2024-05-01T12:00:00Z", "2024-05-01T12:03:05Z", b, sizeof b),
                  "3m05s"));
    CHECK(!strcmp(dt_cli_fmt_span(NULL, NULL, b, sizeof b), "-"));
}

static void test_json_pretty(void) {
    json_t *v = json_pack("{s:[{s:i}]}", "experiments", "id", 3);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    dt_cli_print_json(f, v);
    fclose(f);
    CHECK_MSG(!strcmp(buf, "{\n  \"experiments\": [\n    {\n      \"id\": 3\n    }\n  ]\n}\n"),
              "got:\n%s", buf);
    free(buf);
    json_decref(v);
}

static void test_metrics_csv(void) {
    json_error_t e;
    json_t *rows =
        json_loads("[{\"kind\":\"training\",\"batches\":100,\"epochs\":0.5,\"records\":6400,"
                   "  \"metrics\":{\"loss\":0.5,\"lr\":0.001}},"
                   " {\"kind\":\"validation\",\"batches\":100,\"epochs\":0.5,\"records\":6400,"
                   "  \"metrics\":{\"validation_loss\":0.25,\"acc, top-1\":0.9}},"
                   " {\"kind\":\"training\",\"batches\":200,\"epochs\":1,\"records\":12800,"
                   "  \"metrics\":{\"loss\":null,\"lr\":0.001}}]",
                   0, &e);
    CHECK(rows != NULL);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    dt_cli_metrics_csv(f, rows);
    fclose(f);
    CHECK_MSG(!strcmp(buf, "batches,epochs,records,kind,loss,lr,validation_loss,\"acc, top-1\"\n"
                           "100,0.5,6400,training,0.5,0.001,,\n"
                           "100,0.5,6400,validation,,,0.25,0.9\n"
                           "200,1,12800,training,,0.001,,\n"),
              "got:\n%s", buf);
    free(buf);

    dt_cli_table *t = dt_cli_metrics_table(rows);
    char *s = printed(t, DT_CLI_TABLE, false);
    const char *head = "batches  epochs  records  kind        loss  lr     validation_loss  "
                       "acc, top-1\n";
    CHECK_MSG(!strncmp(s, head, strlen(head)), "got:\n%s", s);
    CHECK(strstr(s, "\n100      0.5     6400     validation  -     -      0.25") != NULL);
    free(s);
    dt_cli_table_free(t);
    json_decref(rows);
}

int main(void) {
    TEST_RUN(test_table_aligned_with_header);
    TEST_RUN(test_plain_tabs_no_header);
    TEST_RUN(test_long_and_odd_values);
    TEST_RUN(test_numbers);
    TEST_RUN(test_times_and_durations);
    TEST_RUN(test_json_pretty);
    TEST_RUN(test_metrics_csv);
    TEST_END();
}
