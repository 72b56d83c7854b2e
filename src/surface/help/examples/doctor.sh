# What killed writers left behind, if anything, and how to remove it.
bluetape-flow doctor
