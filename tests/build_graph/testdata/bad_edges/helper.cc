int Helper() { return 2; }
