"""The OpenAPI document's extras: `responses` (every status of every endpoint with an example,
the headers, the security schemes) and `examples` (what a caller sees, field for field)."""
