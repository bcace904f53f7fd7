# bash completion for sbx — generated from the command tree by scripts/gen-docs.mjs (npm run gen:docs); do not edit
# Install: source <(sbx completion bash)   or copy to /etc/bash_completion.d/sbx

_sbx_subs() {
  case "$1" in
    '') echo 'spawn ls list get rm destroy extend pause resume egress exec shell files logs ps kill preview templates template snapshot fork snapshots volumes volume secrets secret admission quota quotas providers pool workers watch mcp doctor serve worker provider-server config completion' ;;
    'files') echo 'ls cat put get rm mv chmod stat glob watch' ;;
    'templates') echo 'ls list get create update rm delete spawn' ;;
    'snapshots') echo 'ls list get rm delete' ;;
    'volumes') echo 'ls list create rm delete' ;;
    'secrets') echo 'ls list set rm delete' ;;
    'quota') echo 'ls list get set rm delete usage summary' ;;
    'workers') echo 'list get drain delete' ;;
    'worker') echo 'token' ;;
    'worker token') echo 'mint inspect verify' ;;
    'config') echo 'lint' ;;
  esac
}

_sbx_opts() {
  case "$1" in
    '') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'spawn') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --template --owner --idempotency-key --url --api-key --admin-key --user --json --no-color' ;;
    'ls') echo '-q --quiet --url --api-key --admin-key --user --json --no-color' ;;
    'get') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'rm') echo '--all-expired --url --api-key --admin-key --user --json --no-color' ;;
    'extend') echo '--ttl --url --api-key --admin-key --user --json --no-color' ;;
    'pause') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'resume') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'egress') echo '--allow --deny --url --api-key --admin-key --user --json --no-color' ;;
    'exec') echo '-d --detach -i --interactive -t --tty -e --env -w --workdir --timeout --sh --url --api-key --admin-key --user --json --no-color' ;;
    'shell') echo '--sh -e --env -w --workdir --url --api-key --admin-key --user --json --no-color' ;;
    'files') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files ls') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files cat') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files put') echo '--mode -r --recursive --url --api-key --admin-key --user --json --no-color' ;;
    'files get') echo '-r --recursive --url --api-key --admin-key --user --json --no-color' ;;
    'files rm') echo '-r --recursive --url --api-key --admin-key --user --json --no-color' ;;
    'files mv') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files chmod') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files stat') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files glob') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'files watch') echo '--no-recursive --url --api-key --admin-key --user --json --no-color' ;;
    'logs') echo '-n --lines -f --follow -p --process --url --api-key --admin-key --user --json --no-color' ;;
    'ps') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'kill') echo '-s --signal --url --api-key --admin-key --user --json --no-color' ;;
    'preview') echo '--open --url --api-key --admin-key --user --json --no-color' ;;
    'templates') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'templates ls') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'templates get') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'templates create') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --warm --url --api-key --admin-key --user --json --no-color' ;;
    'templates update') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --warm --url --api-key --admin-key --user --json --no-color' ;;
    'templates rm') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'templates spawn') echo '--ttl --provider --meta --owner --url --api-key --admin-key --user --json --no-color' ;;
    'snapshot') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'fork') echo '-n --count --ttl --meta --idempotency-key --url --api-key --admin-key --user --json --no-color' ;;
    'snapshots') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'snapshots ls') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'snapshots get') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'snapshots rm') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'volumes') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'volumes ls') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'volumes create') echo '--provider --url --api-key --admin-key --user --json --no-color' ;;
    'volumes rm') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'secrets') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'secrets ls') echo '--owner --url --api-key --admin-key --user --json --no-color' ;;
    'secrets set') echo '--host --value-file --allow-plain-http --owner --url --api-key --admin-key --user --json --no-color' ;;
    'secrets rm') echo '--owner --url --api-key --admin-key --user --json --no-color' ;;
    'admission') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --template --owner --url --api-key --admin-key --user --json --no-color' ;;
    'quota') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'quota ls') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'quota get') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'quota set') echo '--max-sandboxes --max-ttl --max-exec-timeout --url --api-key --admin-key --user --json --no-color' ;;
    'quota rm') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'quota usage') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'quota summary') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'providers') echo '--test --url --api-key --admin-key --user --json --no-color' ;;
    'pool') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'workers') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'workers list') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'workers get') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'workers drain') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'workers delete') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'watch') echo '--types --sandbox --since --url --api-key --admin-key --user --json --no-color' ;;
    'mcp') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'doctor') echo '-c --config --url --api-key --admin-key --user --json --no-color' ;;
    'serve') echo '-p --port --host -c --config --url --api-key --admin-key --user --json --no-color' ;;
    'worker') echo '--id --control-plane --listen --advertise-url --preview-domain --heartbeat-interval --worker-token-file --signing-key-file --once -c --config --url --api-key --admin-key --user --json --no-color' ;;
    'worker token') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'worker token mint') echo '--worker-id --audience --scopes --ttl --signing-key-file -c --config --url --api-key --admin-key --user --json --no-color' ;;
    'worker token inspect') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'worker token verify') echo '--worker-id --audience --signing-key-file -c --config --url --api-key --admin-key --user --json --no-color' ;;
    'provider-server') echo '--provider --listen --api-key-file --rootfs -c --config --anchor --url --api-key --admin-key --user --json --no-color' ;;
    'config') echo '--url --api-key --admin-key --user --json --no-color' ;;
    'config lint') echo '--production -c --config --url --api-key --admin-key --user --json --no-color' ;;
    'completion') echo '--url --api-key --admin-key --user --json --no-color' ;;
  esac
}

_sbx_value_opts() {
  case "$1" in
    '') echo '--url --api-key --admin-key --user' ;;
    'spawn') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --template --owner --idempotency-key --url --api-key --admin-key --user' ;;
    'ls') echo '--url --api-key --admin-key --user' ;;
    'get') echo '--url --api-key --admin-key --user' ;;
    'rm') echo '--url --api-key --admin-key --user' ;;
    'extend') echo '--ttl --url --api-key --admin-key --user' ;;
    'pause') echo '--url --api-key --admin-key --user' ;;
    'resume') echo '--url --api-key --admin-key --user' ;;
    'egress') echo '--allow --deny --url --api-key --admin-key --user' ;;
    'exec') echo '-e --env -w --workdir --timeout --url --api-key --admin-key --user' ;;
    'shell') echo '--sh -e --env -w --workdir --url --api-key --admin-key --user' ;;
    'files') echo '--url --api-key --admin-key --user' ;;
    'files ls') echo '--url --api-key --admin-key --user' ;;
    'files cat') echo '--url --api-key --admin-key --user' ;;
    'files put') echo '--mode --url --api-key --admin-key --user' ;;
    'files get') echo '--url --api-key --admin-key --user' ;;
    'files rm') echo '--url --api-key --admin-key --user' ;;
    'files mv') echo '--url --api-key --admin-key --user' ;;
    'files chmod') echo '--url --api-key --admin-key --user' ;;
    'files stat') echo '--url --api-key --admin-key --user' ;;
    'files glob') echo '--url --api-key --admin-key --user' ;;
    'files watch') echo '--url --api-key --admin-key --user' ;;
    'logs') echo '-n --lines -p --process --url --api-key --admin-key --user' ;;
    'ps') echo '--url --api-key --admin-key --user' ;;
    'kill') echo '-s --signal --url --api-key --admin-key --user' ;;
    'preview') echo '--url --api-key --admin-key --user' ;;
    'templates') echo '--url --api-key --admin-key --user' ;;
    'templates ls') echo '--url --api-key --admin-key --user' ;;
    'templates get') echo '--url --api-key --admin-key --user' ;;
    'templates create') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --warm --url --api-key --admin-key --user' ;;
    'templates update') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --warm --url --api-key --admin-key --user' ;;
    'templates rm') echo '--url --api-key --admin-key --user' ;;
    'templates spawn') echo '--ttl --provider --meta --owner --url --api-key --admin-key --user' ;;
    'snapshot') echo '--url --api-key --admin-key --user' ;;
    'fork') echo '-n --count --ttl --meta --idempotency-key --url --api-key --admin-key --user' ;;
    'snapshots') echo '--url --api-key --admin-key --user' ;;
    'snapshots ls') echo '--url --api-key --admin-key --user' ;;
    'snapshots get') echo '--url --api-key --admin-key --user' ;;
    'snapshots rm') echo '--url --api-key --admin-key --user' ;;
    'volumes') echo '--url --api-key --admin-key --user' ;;
    'volumes ls') echo '--url --api-key --admin-key --user' ;;
    'volumes create') echo '--provider --url --api-key --admin-key --user' ;;
    'volumes rm') echo '--url --api-key --admin-key --user' ;;
    'secrets') echo '--url --api-key --admin-key --user' ;;
    'secrets ls') echo '--owner --url --api-key --admin-key --user' ;;
    'secrets set') echo '--host --value-file --owner --url --api-key --admin-key --user' ;;
    'secrets rm') echo '--owner --url --api-key --admin-key --user' ;;
    'admission') echo '--image --provider --memory --vcpus --ttl --meta --network --allow --deny --snapshot --volume --secret --auto-pause --on-expire --template --owner --url --api-key --admin-key --user' ;;
    'quota') echo '--url --api-key --admin-key --user' ;;
    'quota ls') echo '--url --api-key --admin-key --user' ;;
    'quota get') echo '--url --api-key --admin-key --user' ;;
    'quota set') echo '--max-sandboxes --max-ttl --max-exec-timeout --url --api-key --admin-key --user' ;;
    'quota rm') echo '--url --api-key --admin-key --user' ;;
    'quota usage') echo '--url --api-key --admin-key --user' ;;
    'quota summary') echo '--url --api-key --admin-key --user' ;;
    'providers') echo '--url --api-key --admin-key --user' ;;
    'pool') echo '--url --api-key --admin-key --user' ;;
    'workers') echo '--url --api-key --admin-key --user' ;;
    'workers list') echo '--url --api-key --admin-key --user' ;;
    'workers get') echo '--url --api-key --admin-key --user' ;;
    'workers drain') echo '--url --api-key --admin-key --user' ;;
    'workers delete') echo '--url --api-key --admin-key --user' ;;
    'watch') echo '--types --sandbox --since --url --api-key --admin-key --user' ;;
    'mcp') echo '--url --api-key --admin-key --user' ;;
    'doctor') echo '-c --config --url --api-key --admin-key --user' ;;
    'serve') echo '-p --port --host -c --config --url --api-key --admin-key --user' ;;
    'worker') echo '--id --control-plane --listen --advertise-url --preview-domain --heartbeat-interval --worker-token-file --signing-key-file -c --config --url --api-key --admin-key --user' ;;
    'worker token') echo '--url --api-key --admin-key --user' ;;
    'worker token mint') echo '--worker-id --audience --scopes --ttl --signing-key-file -c --config --url --api-key --admin-key --user' ;;
    'worker token inspect') echo '--url --api-key --admin-key --user' ;;
    'worker token verify') echo '--worker-id --audience --signing-key-file -c --config --url --api-key --admin-key --user' ;;
    'provider-server') echo '--provider --listen --api-key-file --rootfs -c --config --url --api-key --admin-key --user' ;;
    'config') echo '--url --api-key --admin-key --user' ;;
    'config lint') echo '-c --config --url --api-key --admin-key --user' ;;
    'completion') echo '--url --api-key --admin-key --user' ;;
  esac
}

_sbx_file_opts() {
  case "$1" in
    'secrets set') echo '--value-file' ;;
    'doctor') echo '-c --config' ;;
    'serve') echo '-c --config' ;;
    'worker') echo '--worker-token-file --signing-key-file -c --config' ;;
    'worker token mint') echo '--signing-key-file -c --config' ;;
    'worker token verify') echo '--signing-key-file -c --config' ;;
    'provider-server') echo '--api-key-file --rootfs -c --config' ;;
    'config lint') echo '-c --config' ;;
  esac
}

_sbx_opt_choices() {
  case "$1|$2" in
    'spawn|--network') echo 'none bridge filtered' ;;
    'spawn|--on-expire') echo 'destroy pause' ;;
    'templates create|--network') echo 'none bridge filtered' ;;
    'templates create|--on-expire') echo 'destroy pause' ;;
    'templates update|--network') echo 'none bridge filtered' ;;
    'templates update|--on-expire') echo 'destroy pause' ;;
    'admission|--network') echo 'none bridge filtered' ;;
    'admission|--on-expire') echo 'destroy pause' ;;
    'worker token mint|--audience') echo 'worker:control-plane worker:rpc' ;;
    'worker token verify|--audience') echo 'worker:control-plane worker:rpc' ;;
    'provider-server|--provider') echo 'mock proot docker' ;;
  esac
}

_sbx_arg_words() {
  case "$1" in
    'completion') echo 'bash zsh fish' ;;
  esac
}

_sbx_arg_files() {
  case "$1" in
    'files put') echo 'yes' ;;
    'files get') echo 'yes' ;;
  esac
}

_sbx() {
  local cur prev path word i skip=0 subs
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  path=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$word" in
      --) return 0 ;;
      -*) [[ " $(_sbx_value_opts "$path") " == *" $word "* ]] && skip=1 ;;
      *)
        subs=" $(_sbx_subs "$path") "
        [[ "$subs" == *" $word "* ]] && path="${path:+$path }$word"
        ;;
    esac
  done
  if [[ " $(_sbx_value_opts "$path") " == *" $prev "* ]]; then
    local choices
    choices="$(_sbx_opt_choices "$path" "$prev")"
    if [[ -n "$choices" ]]; then
      COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    elif [[ " $(_sbx_file_opts "$path") " == *" $prev "* ]]; then
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_sbx_opts "$path")" -- "$cur"))
    return 0
  fi
  subs="$(_sbx_subs "$path")"
  if [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  elif [[ -n "$(_sbx_arg_words "$path")" ]]; then
    COMPREPLY=($(compgen -W "$(_sbx_arg_words "$path")" -- "$cur"))
  elif [[ -n "$(_sbx_arg_files "$path")" ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}

complete -o default -F _sbx sbx
