"""Kiln as a torch.compile backend (registered as "kiln" through the torch_dynamo_backends entry
point), the torch.export path and explain_torch. Importing this module imports torch."""
from kiln.torch_backend.backend import REPORTS, STATS, kiln_backend, make_backend

__all__ = ["kiln_backend", "make_backend", "STATS", "REPORTS"]
