#!/usr/bin/env bash
# Checks that the dependency range pyproject.toml declares holds: builds a virtual environment
# with the oldest versions its `dependencies` allow (each `name>=X` installed as `name==X`) and
# one with the newest the package index serves, and runs the unit tests in each.
#
#   tools/check_dependency_range.sh [oldest] [newest]     (both when none is named)
#
# For each set, under a temporary folder (removed at the end unless KEEP=1):
#   1. python -m venv; torch is installed first, alone (pinned to its floor, or the newest), so
#      that its build can be chosen: TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
#      takes the CPU build where that index is reachable (PyPI's torch pulls GBs of CUDA wheels);
#   2. pip install ".[$EXTRAS]": for the oldest set with every core dependency pinned to its floor
#      (the extras' own requirements resolve to what fits), for the newest with --upgrade;
#   3. python -m pytest tests/unit on a copy of the working tree (tracked and untracked files
#      that git does not ignore), with PYTHONPATH unset, so the environment's packages are tested.
# Prints the versions installed and pytest's summary per set (its full log: <set>-pytest.log in
# the folder, kept with KEEP=1 or WORK); exits 1 if a set fails.
#
# Environment: PYTHON (the interpreter for the venvs, default python3), EXTRAS (default
# dev,benchmarks: every unit test runs; with EXTRAS=dev the simulator tests skip, naming the
# extra), PYTEST_ARGS (default "-q -n 2"), WORK (folder to build in, default a new temporary
# one), KEEP=1 (keep it), TORCH_PIP_ARGS (see 1.). pip's own settings apply: where a pip
# configuration caps torch below the newest, lift it for this run (e.g. PIP_CONSTRAINT=/dev/null).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-dev,benchmarks}
PYTEST_ARGS=${PYTEST_ARGS:--q -n 2}
TORCH_PIP_ARGS=${TORCH_PIP_ARGS:-}
SETS=("$@")
[ ${#SETS[@]} -gt 0 ] || SETS=(oldest newest)
for set in "${SETS[@]}"; do
    case $set in
        oldest | newest) ;;
        *) echo "usage: $0 [oldest] [newest] (got '$set')" >&2; exit 2 ;;
    esac
done

if [ -n "${WORK:-}" ]; then
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/syne-dyhpo-range.XXXXXX")
    [ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
fi
echo "building in $WORK"

# the working tree as git sees it (committed or not, ignored files left out)
rm -rf "$WORK/src" && mkdir -p "$WORK/src"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$REPO" && "$PYTHON" -c '
import os, shutil, sys
dest = sys.argv[1]
for name in sys.stdin.buffer.read().decode().split("\0"):
    if name and os.path.isfile(name):  # a tracked file deleted in the working tree is left out
        os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(name, os.path.join(dest, name))
' "$WORK/src")

# the core dependencies' floors, as pins: "name>=X,<Y" -> "name==X"; a dependency without a
# floor is an error (the oldest set would be undefined)
FLOORS=$("$PYTHON" - "$REPO/pyproject.toml" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.S | re.M).group(1)
for requirement in re.findall(r'"([^"]+)"', block):
    floor = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(?:[^,]*,)*?\s*>=\s*([^,;\s]+)", requirement)
    if floor is None:
        sys.exit(f"pyproject.toml: dependency {requirement!r} has no floor (>=): the oldest set is undefined")
    print(f"{floor.group(1)}=={floor.group(3)}")
EOF
)
TORCH_FLOOR=$(echo "$FLOORS" | grep -i '^torch==')

versions() {
    "$1/bin/python" -m pip list --format=freeze 2>/dev/null |
        grep -i -E '^(torch|numpy|scipy|gpytorch|linear[-_]operator|syne[-_]tune|pandas|pytest)==' | tr '\n' ' '
}

status=0
declare -A SUMMARY
for set in "${SETS[@]}"; do
    venv=$WORK/$set
    echo "=== $set: $venv"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
    "${pip[@]}" --upgrade pip
    if [ "$set" = oldest ]; then
        # shellcheck disable=SC2086
        "${pip[@]}" $TORCH_PIP_ARGS "$TORCH_FLOOR"
        # shellcheck disable=SC2086
        "${pip[@]}" "$WORK/src[$EXTRAS]" $FLOORS
    else
        # shellcheck disable=SC2086
        "${pip[@]}" --upgrade $TORCH_PIP_ARGS torch
        "${pip[@]}" --upgrade --upgrade-strategy eager "$WORK/src[$EXTRAS]"
    fi
    installed=$(versions "$venv")
    echo "$set: $installed"
    log=$WORK/$set-pytest.log
    # shellcheck disable=SC2086
    if (cd "$WORK/src" && env -u PYTHONPATH "$venv/bin/python" -m pytest tests/unit $PYTEST_ARGS -p no:cacheprovider -rfEs) \
        >"$log" 2>&1; then
        result=passed
    else
        result=FAILED
        status=1
    fi
    # the short summary (failures, errors and skips, with their reasons), else the last lines
    if grep -q 'short test summary info' "$log"; then
        sed -n '/short test summary info/,$p' "$log"
    else
        tail -n 5 "$log"
    fi
    SUMMARY[$set]="$result: $(grep -E '^=*.* (passed|failed|error)' "$log" | tail -n 1 | tr -d '=') -- $installed"
done

echo
echo "=== dependency range (pyproject floors: $(echo $FLOORS))"
for set in "${SETS[@]}"; do
    echo "$set ${SUMMARY[$set]}"
done
exit $status
