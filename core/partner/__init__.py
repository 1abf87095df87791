"""The partner licensing domain: partners, tokens, customers, contracts, editions,
licenses, the ledger, transfers, billing and statements."""
