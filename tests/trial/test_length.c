/* Tests for src/trial/length.c: converting lengths to batches on the edges (unset, exact
 * multiples, one record below / above, under one batch with either minimum, overflow, epochs
 * by the loader and by records_per_epoch, missing scales, bad units). */
#include "dtrain/trial.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

static dt_length rec(int64_t n) {
    return (dt_length){DT_UNIT_RECORDS, n};
}
static dt_length ep(int64_t n) {
    return (dt_length){DT_UNIT_EPOCHS, n};
}

/* dt_length_batches's result, or -1 with the error kept in dt_last_error(). */
static int64_t conv(dt_length l, int64_t gbs, int64_t bpe, int64_t rpe, dt_length_min min) {
    dt_length_scale s = {
        .global_batch_size = gbs, .batches_per_epoch = bpe, .records_per_epoch = rpe};
    int64_t b = 12345;
    dt_status st = dt_length_batches(l, &s, min, "searcher.max_length", &b);
    if (st != DT_OK) return b == 0 ? -1 : -2; /* -2: *out not cleared on error */
    return b;
}

#define HAS(sub) strstr(dt_last_error(), sub)

static void test_unset_and_batches(void) {
    for (int m = 0; m < 2; m++) {
        CHECK(conv(rec(0), 32, 0, 0, m) == 0);
        CHECK(conv(ep(0), 0, 0, 0, m) == 0); /* unset needs no scale */
        CHECK(conv((dt_length){DT_UNIT_BATCHES, 0}, 0, 0, 0, m) == 0);
        CHECK(conv((dt_length){DT_UNIT_BATCHES, 7}, 0, 0, 0, m) == 7);
        CHECK(conv((dt_length){DT_UNIT_BATCHES, INT64_MAX}, 0, 0, 0, m) == INT64_MAX);
    }
}

static void test_records(void) {
    for (int m = 0; m < 2; m++) {
        CHECK(conv(rec(64), 32, 0, 0, m) == 2);   /* exact multiple */
        CHECK(conv(rec(63), 32, 0, 0, m) == 1);   /* one below: truncated */
        CHECK(conv(rec(65), 32, 0, 0, m) == 2);   /* one above: the partial batch is dropped */
        CHECK(conv(rec(32), 32, 0, 0, m) == 1);   /* exactly one batch */
        CHECK(conv(rec(95), 32, 100, 0, m) == 2); /* batches_per_epoch plays no part */
        CHECK(conv(rec(INT64_MAX), 1, 0, 0, m) == INT64_MAX);
    }
    /* under one batch: the config side refuses, the fit loop trains one batch */
    CHECK(conv(rec(31), 32, 0, 0, DT_LENGTH_MIN_ERROR) == -1);
    CHECK(HAS("searcher.max_length is 31 records = 31 records, less than one batch of 32"));
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    CHECK(conv(rec(1), 32, 0, 0, DT_LENGTH_MIN_ONE) == 1);
    CHECK(conv(rec(31), 32, 0, 0, DT_LENGTH_MIN_ONE) == 1);
    /* no global batch size */
    CHECK(conv(rec(64), 0, 10, 100, DT_LENGTH_MIN_ONE) == -1);
    CHECK(HAS("needs the global batch size") && HAS("hyperparameters.global_batch_size"));
}

static void test_epochs(void) {
    /* by the training loader: exact, no batch size needed */
    CHECK(conv(ep(3), 0, 7, 0, DT_LENGTH_MIN_ONE) == 21);
    CHECK(conv(ep(1), 0, 1, 0, DT_LENGTH_MIN_ERROR) == 1);
    /* the loader's count wins over records_per_epoch */
    CHECK(conv(ep(2), 32, 7, 1000, DT_LENGTH_MIN_ERROR) == 14);
    /* by records_per_epoch: truncated like records */
    CHECK(conv(ep(2), 32, 0, 64, DT_LENGTH_MIN_ERROR) == 4);
    CHECK(conv(ep(1), 32, 0, 65, DT_LENGTH_MIN_ERROR) == 2);
    CHECK(conv(ep(1), 32, 0, 63, DT_LENGTH_MIN_ERROR) == 1);
    CHECK(conv(ep(1), 32, 0, 31, DT_LENGTH_MIN_ERROR) == -1);
    CHECK(HAS("1 epoch = 31 records, less than one batch of 32"));
    CHECK(conv(ep(1), 32, 0, 31, DT_LENGTH_MIN_ONE) == 1);
    /* neither loader nor records_per_epoch */
    CHECK(conv(ep(2), 32, 0, 0, DT_LENGTH_MIN_ONE) == -1);
    CHECK(HAS("searcher.max_length is 2 epochs, which needs records_per_epoch"));
    /* records_per_epoch but no batch size: the batch size is named first */
    CHECK(conv(ep(2), 0, 0, 1000, DT_LENGTH_MIN_ERROR) == -1);
    CHECK(HAS("needs the global batch size"));
}

static void test_overflow(void) {
    CHECK(conv(ep(INT64_MAX / 2 + 1), 0, 2, 0, DT_LENGTH_MIN_ONE) == -1);
    CHECK(HAS("overflows") && dt_last_status() == DT_ERR_CONFIG);
    CHECK(conv(ep(INT64_MAX / 2), 0, 2, 0, DT_LENGTH_MIN_ONE) == INT64_MAX - 1);
    CHECK(conv(ep(INT64_MAX / 1000 + 1), 32, 0, 1000, DT_LENGTH_MIN_ERROR) == -1);
    CHECK(HAS("of 1000 records overflows"));
}

static void test_bad_unit_and_wrapper(void) {
    CHECK(conv((dt_length){(dt_unit)7, 5}, 32, 1, 1, DT_LENGTH_MIN_ONE) == -1);
    CHECK(dt_last_status() == DT_ERR_INVALID && HAS("invalid length unit 7"));
    /* dt_length_to_batches is the config side's: no loader, under one batch is an error */
    int64_t b = 0;
    CHECK(dt_length_to_batches(ep(1), 16, 100, "x", &b) == DT_OK && b == 6);
    CHECK(dt_length_to_batches(rec(15), 16, 0, "x", &b) == DT_ERR_CONFIG && b == 0);
    CHECK(dt_length_to_batches(rec(15), 16, 0, NULL, &b) == DT_ERR_CONFIG);
    CHECK(HAS("the length is 15 records"));
}

int main(void) {
    TEST_RUN(test_unset_and_batches);
    TEST_RUN(test_records);
    TEST_RUN(test_epochs);
    TEST_RUN(test_overflow);
    TEST_RUN(test_bad_unit_and_wrapper);
    TEST_END();
}
