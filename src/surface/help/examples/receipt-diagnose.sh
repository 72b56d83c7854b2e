# Diagnose the receipt (read-only): a healthy run gives its state, the
# trusted head and a checksum over the diagnosis.
bluetape-flow receipt-diagnose --run-id "$RUN"
