# tests/lib/tmux.sh - drives a TUI in a private tmux server, for e2e
# scripts that sourced tests/lib/e2e.sh (it uses $D).  The script sets S to
# the session its checks look at.
#   tmux_setup NAME   checks tmux is there; T runs this script's own server
#   tmux_screen       prints the pane of session $S
#   wait_for RE N     waits up to N tenths of a second for the pane of $S to
#                     show extended regex RE (left in $D/screen)
command -v tmux >/dev/null 2>&1 || { echo "FAIL: tmux is not installed (make deps)"; exit 1; }

tmux_setup() {
	T="tmux -L $1-$$ -f /dev/null"
}

tmux_screen() {
	$T capture-pane -p -t "$S" 2>/dev/null
}

wait_for() {
	i=0
	while [ $i -lt "$2" ]; do
		tmux_screen >"$D/screen"
		grep -Eq -- "$1" "$D/screen" && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
