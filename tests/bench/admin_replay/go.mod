module elastic-audit/bench/admin_replay

go 1.24
