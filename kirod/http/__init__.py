"""Public HTTP ingress: request ids, the API-key gate, the route table and bounded body reads."""
