"""Re-publishes a skill artifact with another component, for host/tests/oci.rs: what a
registry could serve that `skill push` never writes.

    relayer.py REGISTRY REPOSITORY FROM WASM WIT TAG
        reads the manifest FROM (a tag or digest), pushes the component WASM in place of its
        `application/wasm` layer, sets its `dev.skillhost.skill.wit` annotation to WIT, pushes
        the manifest as TAG, and prints its digest.
"""

import hashlib
import json
import sys

from cosign import OCI_MANIFEST, push_blob, request


def relayer(registry, repository, source, wasm, wit, tag):
    base = f"http://{registry}"
    _, body = request("GET", f"{base}/v2/{repository}/manifests/{source}", headers={"Accept": OCI_MANIFEST})
    manifest = json.loads(body)
    with open(wasm, "rb") as f:
        component = push_blob(base, repository, f.read())
    for layer in manifest["layers"]:
        if layer["mediaType"] == "application/wasm":
            layer.update(component)
    manifest["annotations"]["dev.skillhost.skill.wit"] = wit
    data = json.dumps(manifest).encode()
    request("PUT", f"{base}/v2/{repository}/manifests/{tag}", data, {"Content-Type": OCI_MANIFEST})
    print("sha256:" + hashlib.sha256(data).hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(relayer(*sys.argv[1:]))
