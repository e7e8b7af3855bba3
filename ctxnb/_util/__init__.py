"""Small private helpers that import nothing of ctxnb."""
