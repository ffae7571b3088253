"""What envdoctor knows, each kind in one home: compatibility, versions, error codes, messages, remedies, fact keys, launch variables, the aspects compared across machines."""
