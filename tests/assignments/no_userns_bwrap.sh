#!/bin/sh
# Stands in for bubblewrap on a machine without unprivileged user namespaces:
# what bwrap 0.8 says there, and its exit code.
echo "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'." >&2
exit 1
