"""`make compose-test`: build the images and run the compose stack for real, with podman.

See docs/operations.md ("The compose test"). Modules: `engine` (podman, its API socket, the
images), `stack` (docker compose on that socket), `client` (a user and an operator talking to
the stack through its published port), `transcript` (each step with its time), `__main__` (the
steps in order).
"""
