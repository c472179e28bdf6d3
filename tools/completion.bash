# Bash completion for gnc (installed as share/bash-completion/completions/gnc).
# The commands and each command's options come from gnc's own help, which is
# made from the table its parser reads (so they cannot drift): `gnc --help`
# lists the commands, `gnc CMD --help` the options, and an option shown as
# `--flag a|b|c` completes its value from a, b, c.  Anything else completes
# as a file name.

_gnc_help_options() {
    "$1" "$2" --help 2>/dev/null | sed -n 's/^  \(-[A-Za-z]\|--[a-z][a-z-]*\).*/\1/p' | sort -u
}

_gnc() {
    local gnc=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev= cmd=
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        local cmds
        cmds=$("$gnc" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p')
        mapfile -t COMPREPLY < <(compgen -W "$cmds --help --version" -- "$cur")
        return
    fi
    cmd=${COMP_WORDS[1]}
    [ "$cmd" = help ] && { mapfile -t COMPREPLY < <(compgen -W "$("$gnc" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z]\+\) .*/\1/p')" -- "$cur"); return; }
    # a value of the option before: its choices, as the help shows them
    if [[ $prev == -* ]]; then
        local choices
        choices=$("$gnc" "$cmd" --help 2>/dev/null |
                  sed -n "s/^  $prev \([A-Za-z0-9_.:=,-]*|[A-Za-z0-9_.:=,|-]*\)\( .*\)\{0,1\}$/\1/p" | head -1)
        if [ -n "$choices" ]; then
            mapfile -t COMPREPLY < <(compgen -W "${choices//|/ }" -- "$cur")
            return
        fi
        if "$gnc" "$cmd" --help 2>/dev/null | grep -qE "^  $prev [A-Za-z\[]"; then
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_gnc_help_options "$gnc" "$cmd")" -- "$cur")
        return
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}
complete -o filenames -F _gnc gnc
