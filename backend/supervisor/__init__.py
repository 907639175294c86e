"""The supervisor: the demo's processes and the control API that drives them."""
