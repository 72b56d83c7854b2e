# Keep the run where the code lives: publish it into a git repository,
# then verify the publication (its whole history) from git objects.
git init -q --bare runs.git
bluetape-flow publish --run-id "$RUN" --repo runs.git
bluetape-flow bundle-verify --git runs.git --ref "refs/bluetape/runs/$RUN"
