# One file an auditor can take anywhere: the run's audit bundle.
bluetape-flow bundle-export --run-id "$RUN" --out run.bundle.tar
