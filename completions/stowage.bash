#!/bin/bash

__stowage_cursor_index_in_current_word() {
    local remaining="${COMP_LINE}"

    local word
    for word in "${COMP_WORDS[@]::COMP_CWORD}"; do
        remaining="${remaining##*([[:space:]])"${word}"*([[:space:]])}"
    done

    local -ir index="$((COMP_POINT - ${#COMP_LINE} + ${#remaining}))"
    if [[ "${index}" -le 0 ]]; then
        printf 0
    else
        printf %s "${index}"
    fi
}

# positional arguments:
#
# - 1: the current (sub)command's count of positional arguments
#
# required variables:
#
# - repeating_flags: the repeating flags that the current (sub)command can accept
# - non_repeating_flags: the non-repeating flags that the current (sub)command can accept
# - repeating_options: the repeating options that the current (sub)command can accept
# - non_repeating_options: the non-repeating options that the current (sub)command can accept
# - positional_number: value ignored
# - unparsed_words: unparsed words from the current command line
#
# modified variables:
#
# - non_repeating_flags: remove flags for this (sub)command that are already on the command line
# - non_repeating_options: remove options for this (sub)command that are already on the command line
# - positional_number: set to the current positional number
# - unparsed_words: remove all flags, options, and option values for this (sub)command
__stowage_offer_flags_options() {
    local -ir positional_count="${1}"
    positional_number=0

    local was_flag_option_terminator_seen=false
    local is_parsing_option_value=false

    local -ar unparsed_word_indices=("${!unparsed_words[@]}")
    local -i word_index
    for word_index in "${unparsed_word_indices[@]}"; do
        if "${is_parsing_option_value}"; then
            # This word is an option value:
            # Reset marker for next word iff not currently the last word
            [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]] && is_parsing_option_value=false
            unset "unparsed_words[${word_index}]"
            # Do not process this word as a flag or an option
            continue
        fi

        local word="${unparsed_words["${word_index}"]}"
        if ! "${was_flag_option_terminator_seen}"; then
            case "${word}" in
            --)
                unset "unparsed_words[${word_index}]"
                # by itself -- is a flag/option terminator, but if it is the last word, it is the start of a completion
                if [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]]; then
                    was_flag_option_terminator_seen=true
                fi
                continue
                ;;
            -*)
                # ${word} is a flag or an option
                # If ${word} is an option, mark that the next word to be parsed is an option value
                local option
                for option in "${repeating_options[@]}" "${non_repeating_options[@]}"; do
                    [[ "${word}" = "${option}" ]] && is_parsing_option_value=true && break
                done

                # Remove ${word} from ${non_repeating_flags} or ${non_repeating_options} so it isn't offered again
                local not_found=true
                local -i index
                for index in "${!non_repeating_flags[@]}"; do
                    if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                        unset "non_repeating_flags[${index}]"
                        non_repeating_flags=("${non_repeating_flags[@]}")
                        not_found=false
                        break
                    fi
                done
                if "${not_found}"; then
                    for index in "${!non_repeating_flags[@]}"; do
                        if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                            unset "non_repeating_flags[${index}]"
                            non_repeating_flags=("${non_repeating_flags[@]}")
                            break
                        fi
                    done
                fi
                unset "unparsed_words[${word_index}]"
                continue
                ;;
            esac
        fi

        # ${word} is neither a flag, nor an option, nor an option value
        if [[ "${positional_number}" -lt "${positional_count}" || "${positional_count}" -lt 0 ]]; then
            # ${word} is a positional
            ((positional_number++))
            unset "unparsed_words[${word_index}]"
        else
            if [[ -z "${word}" ]]; then
                # Could be completing a flag, option, or subcommand
                positional_number=-1
            else
                # ${word} is a subcommand or invalid, so stop processing this (sub)command
                positional_number=-2
            fi
            break
        fi
    done

    unparsed_words=("${unparsed_words[@]}")

    if\
        ! "${was_flag_option_terminator_seen}"\
        && ! "${is_parsing_option_value}"\
        && [[ ("${cur}" = -* && "${positional_number}" -ge 0) || "${positional_number}" -eq -1 ]]
    then
        COMPREPLY+=($(compgen -W "${repeating_flags[*]} ${non_repeating_flags[*]} ${repeating_options[*]} ${non_repeating_options[*]}" -- "${cur}"))
    fi
}

__stowage_add_completions() {
    local completion
    while IFS='' read -r completion; do
        COMPREPLY+=("${completion}")
    done < <(IFS=$'\n' compgen "${@}" -- "${cur}")
}

__stowage_custom_complete() {
    if [[ -n "${cur}" || -z ${COMP_WORDS[${COMP_CWORD}]} || "${COMP_LINE:${COMP_POINT}:1}" != ' ' ]]; then
        local -ar words=("${COMP_WORDS[@]}")
    else
        local -ar words=("${COMP_WORDS[@]::${COMP_CWORD}}" '' "${COMP_WORDS[@]:${COMP_CWORD}}")
    fi

    "${COMP_WORDS[0]}" "${@}" "${words[@]}"
}

_stowage() {
    local state
    state="$(shopt -p;shopt -po)"
    trap "${state//$'\n'/;}" RETURN
    shopt -s extglob
    set +o history +o posix

    local -xr SAP_SHELL=bash
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(IFS='.';printf %s "${BASH_VERSINFO[*]}")"
    local -r SAP_SHELL_VERSION

    local -r cur="${2}"
    local -r prev="${3}"

    local -i positional_number
    local -a unparsed_words=("${COMP_WORDS[@]:1:${COMP_CWORD}}")

    local -a repeating_flags=()
    local -a non_repeating_flags=(-h --help)
    local -a repeating_options=()
    local -a non_repeating_options=()
    __stowage_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    inspect|segment|decrypt|origin|keyserver|keys|package|download|resume|stop|pause|cancel|add-media|list|info|verify|play|export|delete|recover|service|demo|help)
        # Offer subcommand argument completions
        "_stowage_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'inspect segment decrypt origin keyserver keys package download resume stop pause cancel add-media list info verify play export delete recover service demo help' -- "${cur}"))
        ;;
    esac
}

_stowage_inspect() {
    repeating_flags=()
    non_repeating_flags=(--deep --json --strict -h --help)
    repeating_options=(--header)
    non_repeating_options=(--ca-file --proxy --user-agent --referer --cookies --header-file)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    '--user-agent')
        return
        ;;
    '--referer')
        return
        ;;
    '--cookies')
        return
        ;;
    '--header')
        return
        ;;
    '--header-file')
        return
        ;;
    esac
}

_stowage_segment() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    decrypt|encrypt)
        # Offer subcommand argument completions
        "_stowage_segment_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'decrypt encrypt' -- "${cur}"))
        ;;
    esac
}

_stowage_segment_decrypt() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--method --key --key-file --iv --init --key-id --init-out)
    __stowage_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--method')
        return
        ;;
    '--key')
        return
        ;;
    '--key-file')
        return
        ;;
    '--iv')
        return
        ;;
    '--init')
        return
        ;;
    '--key-id')
        return
        ;;
    '--init-out')
        return
        ;;
    esac
}

_stowage_segment_encrypt() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--method --key --key-file --iv --init --key-id --init-out)
    __stowage_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--method')
        return
        ;;
    '--key')
        return
        ;;
    '--key-file')
        return
        ;;
    '--iv')
        return
        ;;
    '--init')
        return
        ;;
    '--key-id')
        return
        ;;
    '--init-out')
        return
        ;;
    esac
}

_stowage_decrypt() {
    repeating_flags=()
    non_repeating_flags=(--sync --json -h --help)
    repeating_options=()
    non_repeating_options=(--key --key-file --out)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--key')
        return
        ;;
    '--key-file')
        return
        ;;
    '--out')
        return
        ;;
    esac
}

_stowage_origin() {
    repeating_flags=()
    non_repeating_flags=(--live --event --loop -h --help)
    repeating_options=()
    non_repeating_options=(--host --port --profile --seed --bandwidth --latency --error-rate --reset-rate --truncate-rate --stall-rate --stall-ms --window --speed)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--host')
        return
        ;;
    '--port')
        return
        ;;
    '--profile')
        return
        ;;
    '--seed')
        return
        ;;
    '--bandwidth')
        return
        ;;
    '--latency')
        return
        ;;
    '--error-rate')
        return
        ;;
    '--reset-rate')
        return
        ;;
    '--truncate-rate')
        return
        ;;
    '--stall-rate')
        return
        ;;
    '--stall-ms')
        return
        ;;
    '--window')
        return
        ;;
    '--speed')
        return
        ;;
    esac
}

_stowage_keyserver() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    init|add-asset|token|run|migrate|rotate-master-key)
        # Offer subcommand argument completions
        "_stowage_keyserver_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'init add-asset token run migrate rotate-master-key' -- "${cur}"))
        ;;
    esac
}

_stowage_keyserver_init() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--data-dir --database)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--data-dir')
        return
        ;;
    '--database')
        return
        ;;
    esac
}

_stowage_keyserver_add-asset() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--key-id --key --key-file --policy --data-dir --database)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--key-id')
        return
        ;;
    '--key')
        return
        ;;
    '--key-file')
        return
        ;;
    '--policy')
        return
        ;;
    '--data-dir')
        return
        ;;
    '--database')
        return
        ;;
    esac
}

_stowage_keyserver_token() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=(--asset)
    non_repeating_options=(--sub --ttl --data-dir)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--sub')
        return
        ;;
    '--asset')
        return
        ;;
    '--ttl')
        return
        ;;
    '--data-dir')
        return
        ;;
    esac
}

_stowage_keyserver_run() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--data-dir --database --host --port --log-format --log-level)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--data-dir')
        return
        ;;
    '--database')
        return
        ;;
    '--host')
        return
        ;;
    '--port')
        return
        ;;
    '--log-format')
        __stowage_add_completions -W 'text'$'\n''json'
        return
        ;;
    '--log-level')
        __stowage_add_completions -W 'trace'$'\n''debug'$'\n''info'$'\n''notice'$'\n''warning'$'\n''error'$'\n''critical'
        return
        ;;
    esac
}

_stowage_keyserver_migrate() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--from --database)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--from')
        return
        ;;
    '--database')
        return
        ;;
    esac
}

_stowage_keyserver_rotate-master-key() {
    repeating_flags=()
    non_repeating_flags=(--prepare -h --help)
    repeating_options=()
    non_repeating_options=(--batch-size --data-dir --database)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--batch-size')
        return
        ;;
    '--data-dir')
        return
        ;;
    '--database')
        return
        ;;
    esac
}

_stowage_keys() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    list|renew|return|fetch|sync|trust|unpin|audit)
        # Offer subcommand argument completions
        "_stowage_keys_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'list renew return fetch sync trust unpin audit' -- "${cur}"))
        ;;
    esac
}

_stowage_keys_list() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_keys_renew() {
    repeating_flags=()
    non_repeating_flags=(--all --json -h --help)
    repeating_options=()
    non_repeating_options=(--token --token-file)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--token')
        return
        ;;
    '--token-file')
        return
        ;;
    esac
}

_stowage_keys_return() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_keys_fetch() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=(--key-server --token --token-file)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--key-server')
        return
        ;;
    '--token')
        return
        ;;
    '--token-file')
        return
        ;;
    esac
}

_stowage_keys_sync() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_keys_trust() {
    repeating_flags=()
    non_repeating_flags=(--remove --json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_keys_unpin() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_keys_audit() {
    repeating_flags=()
    non_repeating_flags=(--verify --json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_package() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--asset-id --method --out --keyserver-data-dir --keyserver-database --rotate-every --key-server-url)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--asset-id')
        return
        ;;
    '--method')
        return
        ;;
    '--out')
        return
        ;;
    '--keyserver-data-dir')
        return
        ;;
    '--keyserver-database')
        return
        ;;
    '--rotate-every')
        return
        ;;
    '--key-server-url')
        return
        ;;
    esac
}

_stowage_download() {
    repeating_flags=()
    non_repeating_flags=(--background --play --json -h --help)
    repeating_options=(--header --header-host --trust-key-server)
    non_repeating_options=(--player --attach --priority --min-bitrate --max-bitrate --audio --subtitles --concurrency --header-file --key-server --token --token-file --asset-id --title --duration --until --user-agent --referer --cookies --keep-free --limit-rate --ca-file --proxy)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--player')
        return
        ;;
    '--attach')
        return
        ;;
    '--priority')
        return
        ;;
    '--min-bitrate')
        return
        ;;
    '--max-bitrate')
        return
        ;;
    '--audio')
        return
        ;;
    '--subtitles')
        return
        ;;
    '--concurrency')
        return
        ;;
    '--header')
        return
        ;;
    '--header-file')
        return
        ;;
    '--header-host')
        return
        ;;
    '--key-server')
        return
        ;;
    '--trust-key-server')
        return
        ;;
    '--token')
        return
        ;;
    '--token-file')
        return
        ;;
    '--asset-id')
        return
        ;;
    '--title')
        return
        ;;
    '--duration')
        return
        ;;
    '--until')
        return
        ;;
    '--user-agent')
        return
        ;;
    '--referer')
        return
        ;;
    '--cookies')
        return
        ;;
    '--keep-free')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_resume() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=(--keep-free --limit-rate --ca-file --proxy)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--keep-free')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_stop() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=(--keep-free --limit-rate --ca-file --proxy)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--keep-free')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_pause() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_cancel() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_add-media() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=(--audio --subtitles --keep-free --limit-rate --ca-file --proxy)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--audio')
        return
        ;;
    '--subtitles')
        return
        ;;
    '--keep-free')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_list() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_info() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_verify() {
    repeating_flags=()
    non_repeating_flags=(--deep --json -h --help)
    repeating_options=()
    non_repeating_options=(--for)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--for')
        return
        ;;
    esac
}

_stowage_play() {
    repeating_flags=()
    non_repeating_flags=(--checksums --offline --json -h --help)
    repeating_options=()
    non_repeating_options=(--player --ca-file --proxy --port)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--player')
        return
        ;;
    '--ca-file')
        return
        ;;
    '--proxy')
        return
        ;;
    '--port')
        return
        ;;
    esac
}

_stowage_export() {
    repeating_flags=()
    non_repeating_flags=(--overwrite --json -h --help)
    repeating_options=()
    non_repeating_options=(--out)
    __stowage_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--out')
        return
        ;;
    esac
}

_stowage_delete() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 1
}

_stowage_recover() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_service() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    run|install|status|upkeep)
        # Offer subcommand argument completions
        "_stowage_service_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'run install status upkeep' -- "${cur}"))
        ;;
    esac
}

_stowage_service_run() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--max-downloads --limit-rate --keep-free --window --upkeep-interval --renew-below --token-command --proxy)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--max-downloads')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--keep-free')
        return
        ;;
    '--window')
        return
        ;;
    '--upkeep-interval')
        return
        ;;
    '--renew-below')
        return
        ;;
    '--token-command')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_service_install() {
    repeating_flags=()
    non_repeating_flags=(-h --help)
    repeating_options=()
    non_repeating_options=(--max-downloads --limit-rate --keep-free --window --upkeep-interval --renew-below --token-command --proxy)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--max-downloads')
        return
        ;;
    '--limit-rate')
        return
        ;;
    '--keep-free')
        return
        ;;
    '--window')
        return
        ;;
    '--upkeep-interval')
        return
        ;;
    '--renew-below')
        return
        ;;
    '--token-command')
        return
        ;;
    '--proxy')
        return
        ;;
    esac
}

_stowage_service_status() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_service_upkeep() {
    repeating_flags=()
    non_repeating_flags=(--json -h --help)
    repeating_options=()
    non_repeating_options=()
    __stowage_offer_flags_options 0
}

_stowage_demo() {
    repeating_flags=()
    non_repeating_flags=(--keep -h --help)
    repeating_options=()
    non_repeating_options=(--fixture --profile)
    __stowage_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--fixture')
        return
        ;;
    '--profile')
        return
        ;;
    esac
}

_stowage_help() {
    :
}

complete -o filenames -F _stowage stowage
