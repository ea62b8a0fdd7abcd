"""pin-bump: find the fork's commit pins in a monorepo, plan the bump, verify it, write it."""
