#!/usr/bin/env bash
# Runs the testbed packages (hack/ and test/) in two lanes side by side, for
# `make test`. Each lane runs one package at a time (-p 1): every package
# starts its own control plane, and its scaled-time scenarios need the CPU.
#
# Lane "realnode": test/realnode, test/imds, then test/imds again with the
# IMDS-only build. The real-node suite mostly waits (about 1,000 s of wall
# time for 420 s of CPU: nodes booting, the controller-manager's 50 s node
# grace, 20 s shutdowns), so it shares the two cores with the other lane
# instead of holding them alone. Both packages that make network namespaces
# are in this lane; real-node slots and namespaces are locked per slot
# (test/testenv), so lanes never share one either way.
# Lane "rest": every other package under hack/ and test/.
#
# The realnode lane's lines are prefixed with "[realnode lane] "; the script
# fails when either lane does, after both have ended.
set -uo pipefail
go=${GO:-go}

realnode_lane() {
  "$go" test -count=1 -timeout 30m -p 1 ./test/realnode/ ./test/imds/ &&
    LIFEBOAT_IMDS_BUILD=imdsonly "$go" test -count=1 -timeout 10m ./test/imds/
}

rest=$("$go" list ./hack/... ./test/... | grep -v -E '/test/(realnode|imds)$') || {
  echo "go list failed" >&2
  exit 1
}

# The lane runs in a process group of its own (set -m), so that an
# interrupt reaching this script is passed on to all of it.
set -m
(
  realnode_lane 2>&1 | sed -u 's/^/[realnode lane] /'
  exit "${PIPESTATUS[0]}"
) &
lane=$!
set +m
trap 'kill -INT -- -"$lane" 2>/dev/null' INT TERM

# shellcheck disable=SC2086 # one package path per word
"$go" test -count=1 -timeout 30m -p 1 $rest
rest_rc=$?
wait "$lane"
lane_rc=$?
echo "testbed lanes: rest rc=$rest_rc, realnode lane rc=$lane_rc"
[ "$rest_rc" -eq 0 ] && [ "$lane_rc" -eq 0 ]
