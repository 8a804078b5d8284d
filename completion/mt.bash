# bash completion for mt-trace, mt-encode, mt-reconstruct and mt-report.
#
# Each tool's options come from its own --help (read once per shell and
# tool), so the completion never lags behind the tools.  Installed as
# share/bash-completion/completions/mt-* (bash-completion loads it the
# first time one of the four is completed), or: source completion/mt.bash

# _mt_help_options TOOL: one "--name VALUE" per option (VALUE empty for a
# flag), as TOOL --help shows them: "--output FILE", "--top N|all",
# "--track-allocators=BOOL", "--json".
_mt_help_options() {
	local var="_mt_help_${1//[^a-zA-Z0-9]/_}"

	if [[ -z ${!var-} ]]; then
		printf -v "$var" '%s' "$("$1" --help 2>/dev/null |
			grep -oE -- '--[a-z][a-z-]*([= ][A-Z][A-Za-z|]*)?' |
			sed 's/=/ /' | sort -u)"
	fi
	printf '%s\n' "${!var}"
}

# _mt_value TOOL OPTION: the placeholder of OPTION's value, empty for a
# flag or an unknown option
_mt_value() {
	local name value

	while read -r name value; do
		if [[ $name == "$2" && -n $value ]]; then
			printf '%s\n' "$value"
			return
		fi
	done < <(_mt_help_options "$1")
}

# _mt_complete_value PLACEHOLDER CUR: what may follow the option
_mt_complete_value() {
	case $1 in
	FILE | F | FIFO | PATH | BASE | HEAD)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$2")
		;;
	BOOL) mapfile -t COMPREPLY < <(compgen -W 'true false' -- "$2") ;;
	WHEN) mapfile -t COMPREPLY < <(compgen -W 'peak exit' -- "$2") ;; # --pprof-inuse
	METRIC) # --sort, --flamegraph-of
		mapfile -t COMPREPLY < <(compgen -W \
			'peak allocated count not-freed' -- "$2")
		;;
	SPACE) mapfile -t COMPREPLY < <(compgen -W 'heap mapped' -- "$2") ;;
	*'|all') mapfile -t COMPREPLY < <(compgen -W 'all' -- "$2") ;;
	*) COMPREPLY=() ;; # a size, a duration, a name: nothing to offer
	esac
}

# mt-trace -- CMD ARGS...: complete CMD as a command, then as bash would
_mt_command_after() {
	local first=$1 cur=${COMP_WORDS[COMP_CWORD]}

	if declare -F _command_offset >/dev/null; then
		_command_offset "$first"
	elif ((COMP_CWORD == first)); then
		mapfile -t COMPREPLY < <(compgen -c -- "$cur")
	else
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	fi
}

_mt() {
	local tool=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
	local prev=${COMP_WORDS[COMP_CWORD - 1]} value i

	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [[ ${COMP_WORDS[i]} == -- ]]; then
			_mt_command_after $((i + 1))
			return
		fi
	done
	# "--opt=" is split at '=' (COMP_WORDBREAKS): the option is before it
	if [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
		prev=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == = ]]; then
		prev=${COMP_WORDS[COMP_CWORD - 1]} cur=
	fi
	if [[ $prev == -* ]] && value=$(_mt_value "$tool" "$prev") &&
		[[ -n $value ]]; then
		_mt_complete_value "$value" "$cur"
		return
	fi
	# each name once: --help may show one with and without a value
	# ("--stacks[=BOOL]", "--no-stacks" beside "--stacks BOOL")
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W \
			"$(_mt_help_options "$tool" | cut -d' ' -f1 | sort -u)" \
			-- "$cur")
		return
	fi
	compopt -o filenames 2>/dev/null
	mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}

complete -F _mt mt-trace mt-encode mt-reconstruct mt-report
