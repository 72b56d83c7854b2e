"""Check an `attest` envelope with verifiers nobody here wrote.

usage: attest_check.py ENVELOPE.json PUBLIC_KEY_HEX KEYID

securesystemslib (DSSE, Ed25519) verifies the envelope's signature over
DSSE's PAE; in-toto-attestation parses and validates the Statement v1.
Prints the statement's predicateType and subject digest as JSON; exits
non-zero on any failure.
"""

import json
import sys

from google.protobuf import json_format
from in_toto_attestation.v1 import statement, statement_pb2
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey


def main() -> int:
    path, public_hex, keyid = sys.argv[1:4]
    with open(path, "rb") as f:
        envelope = Envelope.from_dict(json.load(f))
    if envelope.payload_type != "application/vnd.in-toto+json":
        raise SystemExit(f"payloadType is {envelope.payload_type}")
    key = SSlibKey(keyid, "ed25519", "ed25519", {"public": public_hex})
    accepted = envelope.verify([key], 1)
    if keyid not in accepted:
        raise SystemExit("the key did not verify the envelope")
    pb = json_format.Parse(envelope.payload, statement_pb2.Statement())
    parsed = statement.Statement.copy_from_pb(pb)
    parsed.validate()
    out = json_format.MessageToDict(parsed.pb, preserving_proto_field_name=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
