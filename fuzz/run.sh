#!/bin/bash
# run.sh - run libFuzzer targets, FUZZ_JOBS at a time, each for SECONDS
# over its seed corpus; new inputs go to build-fuzz/corpus-NAME, crashes
# to build-fuzz/crash-NAME-*.  Prints each target's executions; fails if
# any target crashed, leaked or could not run.
#
#   fuzz/run.sh SECONDS JOBS TARGET...
set -u
SECONDS_EACH=$1
JOBS=$2
shift 2

one() {
	local t=$1 log
	log=build-fuzz/log-$t
	mkdir -p "build-fuzz/corpus-$t" build-fuzz/old
	# findings of earlier runs are kept aside (make them regression inputs
	# in fuzz/corpus/NAME); only this run's decide
	mv build-fuzz/crash-"$t"-* build-fuzz/old/ 2>/dev/null
	build-fuzz/fuzz_"$t" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
		-artifact_prefix="build-fuzz/crash-$t-" \
		"build-fuzz/corpus-$t" "fuzz/corpus/$t" > "$log" 2>&1
	local rc=$?
	echo "== fuzz $t ($SECONDS_EACH s): $(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions"
	grep -E "ERROR|SUMMARY" "$log" | head -5
	if [ $rc -ne 0 ] || ls build-fuzz/crash-"$t"-* > /dev/null 2>&1; then
		echo "fuzz $t: failed (exit $rc); see $log"
		return 1
	fi
}
export -f one
export SECONDS_EACH
printf '%s\n' "$@" | xargs -P "$JOBS" -I{} bash -c 'one {}'
