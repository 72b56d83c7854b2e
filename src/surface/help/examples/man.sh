# Write the man pages, one for the tool and one per command, into man/.
bluetape-flow man --out man/
# man -l man/bluetape-flow.1
