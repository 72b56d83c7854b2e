# Load bash completion for bluetape-flow into this shell (other shells:
# zsh, fish, elvish, powershell).
bluetape-flow completions bash > bluetape-flow.bash
source bluetape-flow.bash
complete -p bluetape-flow
