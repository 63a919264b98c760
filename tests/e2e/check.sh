# check.sh — the tally of the end-to-end scripts, sourced by tests/e2e/test_*.sh:
#   check 'CONDITION' 'MESSAGE'  evaluates CONDITION (it may read $rc, the status of the last
#                                command) and counts a pass, or a failure printing MESSAGE;
#   summary                      prints "N passed, M failed", non-zero status on any failure.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
summary() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
