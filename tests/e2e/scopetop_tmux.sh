#!/bin/sh
# scopetop_tmux.sh - runs scopetop for real inside tmux against a private
# scoped and tests/helpers/tui_tree (a known tree): rows named by their
# bodies, collapse/expand, filter (by site and by body), the detail pane's
# symbolized stack, grouping, the dump key, column choice (and the
# busy/sched/idle columns), resize,
# the exited state, q and SIGTERM restoring the terminal, colours and
# NO_COLOR, and --once.
set -u
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
. "$TOP/tests/lib/tmux.sh"
HELPER=$TOP/$BUILD/tests/helpers/tui_tree
for f in "$BIN/scoped" "$BIN/scopetop" "$HELPER"; do
	[ -x "$f" ] || { echo "FAIL: $f is not built"; exit 1; }
done

private_dir scopetop-e2e
SOCK=$SCOPED_SOCKET
tmux_setup scopetop-e2e
S=main # the session the checks look at
dpid= HPID=
cleanup() {
	$T kill-server 2>/dev/null
	[ -n "$HPID" ] && kill -KILL "$HPID" 2>/dev/null
	stop_all "$dpid"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- screen:"; tmux_screen
	echo "--- scoped log:"; tail -5 "$D/scoped.log" 2>/dev/null
	exit 1
}

gone() { ! grep -Eq -- "$1" "$D/screen"; }

scoped_start "$D/scoped.log" --retain 30 || fail "scoped did not create $(control_sock)"

SCOPED_SOCKET=$SOCK "$HELPER" >"$D/helper.out" 2>&1 &
HPID=$!
poll 100 grep -qs ready "$D/helper.out" ||
	fail "tui_tree did not start: $(cat "$D/helper.out")"

# --once: the tree as text, once the daemon holds all of it (the checks below
# say what is missing if it never does).
once_full() {
	SCOPED_SOCKET=$SOCK "$BIN/scopetop" --once "$HPID" >"$D/once" 2>&1
	# The backlog's row, not any "queued": the pool's line says "queued 0"
	# before the backlog's fork reaches the daemon (the agent holds a
	# fork up to 2 ms for its end, docs/agent.md).
	grep -Eq "queued .*tui_backlog " "$D/once" && grep -q "handle" "$D/once"
}
poll 100 once_full || :
# Subtask rows are named by the function they run (tui_tree.c's bodies).
for want in "<root> tui_tree \[$HPID\]" "server" "handle" "queued" "done" "pools \(1\)" \
	"io size 5/4" "running .*tui_fetch_user " "(running|joining) .*tui_handle " "done .*tui_audit " \
	"queued .*tui_backlog " "tui_poll_peer "; do
	grep -Eq -- "$want" "$D/once" || { cat "$D/once"; fail "--once lacks '$want'"; }
done
SCOPED_SOCKET=$SOCK "$BIN/scopetop" --once --ascii "$HPID" >"$D/once_ascii"
LC_ALL=C grep -q '[^ -~]' "$D/once_ascii" && fail "--ascii printed non-ASCII bytes"
grep -q '^\* running' "$D/once_ascii" || fail "--ascii lacks the '* running' glyph"
LC_ALL=C SCOPED_SOCKET=$SOCK "$BIN/scopetop" --once "$HPID" >"$D/once_c"
LC_ALL=C grep -q '[^ -~]' "$D/once_c" && fail "a non-UTF-8 locale did not fall back to ASCII"
"$BIN/scopetop" --help | grep -q -- "--socket PATH" || fail "--help lacks --socket"
"$BIN/scopetop" --version | grep -q "^scopetop [0-9]" || fail "--version prints no version"
"$BIN/scopetop" --interval 1 2>/dev/null && fail "--interval 1 was accepted (range 25..5000)"
SCOPED_SOCKET=$SOCK "$BIN/scopetop" --once 999999999 >/dev/null 2>"$D/err" && fail "--once on a bad pid succeeded"
grep -q "scopetop:" "$D/err" || fail "no error message for a bad pid"

# The live view, in a 100x30 terminal.
FETCH_LINE=$(grep -n 'tui_fetch_user, NULL' "$TOP/tests/helpers/tui_tree.c" | cut -d: -f1)
$T new-session -d -s main -x 100 -y 30 \
	"cd $D && LANG=C.UTF-8 SCOPED_SOCKET=$SOCK $BIN/scopetop $HPID; echo scopetop-exit=\$?; sleep 60"
wait_for "tui_tree \[$HPID\] live" 50 || fail "no live header"
wait_for "queued" 50 || fail "the queued subtask is not shown"
for want in "server" "◎ joining .*handle" "✓ done" "○ queued" "STATE +NAME +ID +AGE" \
	"tui_tree.c:$FETCH_LINE" "● running .*tui_fetch_user "; do
	wait_for "$want" 30 || fail "live view lacks '$want'"
done

ESC=$(printf '\033')
$T capture-pane -e -p -t "$S" | grep -q "$ESC\[3[0-7]m" || fail "no colours without NO_COLOR"
$T capture-pane -e -p -t "$S" | grep "done" | grep -Eq "$ESC\[([0-9]+;)*2m" ||
	fail "the ended subtask is not dimmed"

# Collapse the server scope (row 2), then expand it again.
$T send-keys -t "$S" j Enter
wait_for "▸ server" 30 || fail "Enter did not collapse the scope"
gone "tui_tree.c:$FETCH_LINE" || fail "collapsed scope still shows its subtasks"
$T send-keys -t "$S" Space
wait_for "tui_tree.c:$FETCH_LINE" 30 || fail "Space did not expand the scope"

# Filter by fork site: only that subtask (and its ancestors) stays.
$T send-keys -t "$S" / "tui_tree.c:$FETCH_LINE" Enter
wait_for "filter\[tui_tree.c:$FETCH_LINE\]" 30 || fail "the filter is not shown"
gone "queued" || fail "the filter kept a row that does not match"
grep -q "server" "$D/screen" || fail "the filter dropped the matching row's parent"

# Select the subtask and open its detail: the stack comes from scoped.
$T send-keys -t "$S" End Enter
if ! wait_for "at tui_fetch_user \(tui_tree.c:[0-9]+\)" 60; then
	# TSan defers signals in blocked threads, so signal-mode capture times
	# out there; without BPF that build cannot show this stack.
	case "$BUILD" in
	*tsan*) grep -q "stack error" "$D/screen" || fail "the stack of tui_fetch_user is not shown"
		echo "note: no signal-mode stack under TSan; stack lines not checked" ;;
	*) fail "the stack of tui_fetch_user is not shown" ;;
	esac
fi
for want in "stack of worker" "parent chain: server#" "request_id=r-17" "forked at .*tui_tree.c:$FETCH_LINE" \
	"task [0-9]+ tui_fetch_user\(\) " "time: queued [^,]+, ran [^ ]+ = busy [^ ]+ \+ joining "; do
	grep -Eq -- "$want" "$D/screen" || fail "detail lacks '$want'"
done
$T send-keys -t "$S" Escape Escape
wait_for "○ queued" 30 || fail "Esc did not clear the filter"

# Filter by the body's name.
$T send-keys -t "$S" / "tui_backlog" Enter
wait_for "filter\[tui_backlog\]" 30 || fail "the function filter is not shown"
grep -q "○ queued" "$D/screen" || fail "the filter by function lost tui_backlog's row"
gone "tui_fetch_user" || fail "the filter by function kept tui_fetch_user"
# A key sequence curses does not know is ignored whole: the filter stays.
$T send-keys -t "$S" -l "$(printf '\033[99~')"
wait_for "ignored an unknown key sequence" 30 || fail "an unknown key sequence was not ignored"
gone "tui_fetch_user" || fail "an unknown key sequence cleared the filter"
$T send-keys -t "$S" Escape
wait_for "tui_fetch_user" 30 || fail "Esc did not clear the function filter"

# f hides what has finished, and says how much.
$T send-keys -t "$S" f
wait_for "[0-9]+ finished hidden" 30 || fail "f did not hide the finished rows"
gone "✓ done" || fail "f left a finished row"
$T send-keys -t "$S" f
wait_for "✓ done" 30 || fail "f did not show the finished rows again"

# n and N jump between the rows that match the filter: the two pollers.
$T send-keys -t "$S" / "tui_poll_peer" Enter Home n
wait_for "task [0-9]+ tui_poll_peer\(\)" 30 || fail "n did not go to a matching row"
first=$(grep -Eo "task [0-9]+ tui_poll_peer\(\)" "$D/screen" | head -1)
$T send-keys -t "$S" n
wait_for "task [0-9]+ tui_poll_peer\(\)" 30 && ! grep -q "$first" "$D/screen" ||
	fail "n did not go on to the other match"
$T send-keys -t "$S" N
wait_for "$first" 30 || fail "N did not come back to the first match"
$T send-keys -t "$S" Escape
# 5 hides the SITE column and shows it again.
$T send-keys -t "$S" 5
wait_for "column SITE hidden" 30 || fail "5 did not hide SITE"
gone "AGE JOINER +DEADLN SITE" || fail "SITE is still shown"
# The room SITE left takes the time columns (tokio-console's Busy, Sched,
# Idle): a subtask has its busy and queued time, one joining its scope
# (tui_handle) idle time; 7 hides BUSY again.
D_RE='[0-9.]+(ms|s)|[0-9]+m[0-9]+s'
wait_for "WORKER +BUSY +SCHED +IDLE" 30 || fail "no BUSY SCHED IDLE columns once SITE is hidden"
wait_for "tui_fetch_user .* ($D_RE) +($D_RE) +($D_RE) *\$" 30 ||
	fail "the fetch subtask's row has no busy, sched and idle time"
wait_for "joining .*tui_handle .* ($D_RE) +($D_RE) +[0-9.]+s *\$" 30 ||
	fail "the joining tui_handle has no idle time in seconds"
$T send-keys -t "$S" 7
wait_for "column BUSY hidden" 30 || fail "7 did not hide BUSY"
gone "WORKER +BUSY" || fail "BUSY is still shown"
$T send-keys -t "$S" 7 5
wait_for "DEADLN SITE" 30 || fail "5 did not show SITE again"

# t: every thread, also those running no task, with its state and top frame.
$T send-keys -t "$S" t
wait_for "TID +NAME +ROLE +POOL +STATE" 30 || fail "t did not open the thread view"
for want in " $HPID +tui-main +main " "scoped-agent +agent " " worker +io " "at |\(|[a-z_]+ \("; do
	wait_for "$want" 60 || fail "the thread view lacks '$want'"
done
$T send-keys -t "$S" t
wait_for "STATE +NAME +ID +AGE" 30 || fail "t did not return to the tree"

# Paused, the pane still fetches the selected thread's stack (once).
$T send-keys -t "$S" p / "tui_handle" Enter Home j j
wait_for "PAUSED" 30 || fail "p did not pause"
wait_for "task 3 tui_handle" 30 || fail "the tui_handle row is not selected"
case "$BUILD" in
*tsan*) ;;
*) wait_for "at tui_handle \(tui_tree.c:[0-9]+\)" 60 || fail "paused, the stack pane never showed the stack" ;;
esac
$T send-keys -t "$S" Escape p
wait_for "○ queued" 30 || fail "Esc did not clear the filter after the pause"

# Help comes from the key table.
$T send-keys -t "$S" '?'
wait_for "group identical subtasks" 30 || fail "? did not show the key table"
$T send-keys -t "$S" x
wait_for "STATE +NAME" 30 || fail "a key did not leave help"

# Group: the two identical pollers become one row.
$T send-keys -t "$S" g
wait_for "tui_poll_peer ×2" 60 || fail "g did not group the two identical subtasks under their body's name"
$T send-keys -t "$S" g

# Dump to a file; the path is shown and holds a JDK thread dump.
$T send-keys -t "$S" d
wait_for "dump written to /[^ ]+\.json" 50 || fail "d did not write a dump"
DUMP=$(grep -Eo "/[^ ]+\.json" "$D/screen" | head -1)
grep -q '"threadDump"' "$DUMP" || fail "the dump $DUMP is not a thread dump"

# Resize: still draws, within the new width.
$T resize-window -t "$S" -x 80 -y 24
wait_for "server" 30 || fail "nothing drawn after resizing to 80x24"
W=$($T capture-pane -p -t "$S" | LC_ALL=C.UTF-8 wc -L)
[ "$W" -le 80 ] || fail "a line is $W columns wide after resizing to 80"
# At 80x24 the pane keeps the stack: several frames, not one.
$T send-keys -t "$S" / "tui_fetch_user" Enter End
case "$BUILD" in
*tsan*) ;;
*asan*)
	# At -O1 the runtime's wait is five frames deep, so the task's own
	# frame is below what an 80x24 pane shows: the frames must still fit.
	wait_for "^  at sc_park_word \(" 60 || fail "no stack at 80x24"
	[ "$(grep -c '^  at ' "$D/screen")" -ge 3 ] || fail "fewer than 3 frames fit at 80x24" ;;
*) wait_for "at tui_fetch_user \(" 60 || fail "no stack at 80x24"
   [ "$(grep -c '^  at ' "$D/screen")" -ge 3 ] || fail "fewer than 3 frames fit at 80x24" ;;
esac
grep -q '…' "$D/screen" || fail "no cut line ends in an ellipsis at 80x24"
$T send-keys -t "$S" Escape
$T resize-window -t "$S" -x 60 -y 12
wait_for "scopetop" 30 || fail "nothing drawn at 60x12"
$T resize-window -t "$S" -x 100 -y 30
wait_for "pools" 30 || fail "nothing drawn after growing back"

# The program dies: the view says so and keeps the last tree.
kill -KILL "$HPID"; wait "$HPID" 2>/dev/null; HPID=
wait_for "(EXITED|DETACHED)[^,]*, last tree kept" 80 || fail "the exited state is not shown"
grep -q "server" "$D/screen" || fail "the last tree was not kept"

# q quits and leaves the terminal as it was.
$T send-keys -t "$S" q
wait_for "scopetop-exit=0" 30 || fail "q did not exit cleanly"
[ "$($T display -p -t "$S" '#{alternate_on}')" = 0 ] || fail "the alternate screen is still on after q"

# SIGTERM restores the terminal too (picker mode, no pid, NO_COLOR).
# (The new session starts before the old one ends: killing the last
# session would take the server down under the next command.)
$T new-session -d -s sig -x 80 -y 24 \
	"NO_COLOR=1 SCOPED_SOCKET=$SOCK $BIN/scopetop; echo scopetop-exit=\$?; sleep 60"
$T kill-session -t main
S=sig
wait_for "instrumented processes" 50 || fail "the picker is not shown"
$T capture-pane -e -p -t "$S" | grep -q "$ESC\[[34][0-7]m" && fail "colours despite NO_COLOR"
SHELL_PID=$($T display -p -t "$S" '#{pane_pid}')
TOP_PID=$(ps -o pid= --ppid "$SHELL_PID" | head -1 | tr -d ' ')
[ -n "$TOP_PID" ] || fail "cannot find scopetop's pid under the pane"
kill -TERM "$TOP_PID"
wait_for "scopetop-exit=143" 30 || fail "SIGTERM did not end scopetop with 143"
[ "$($T display -p -t "$S" '#{alternate_on}')" = 0 ] || fail "the alternate screen is still on after SIGTERM"
[ "$($T display -p -t "$S" '#{cursor_flag}')" = 1 ] || fail "the cursor is still hidden after SIGTERM"
echo "ok: scopetop in tmux"
