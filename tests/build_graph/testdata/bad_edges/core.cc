int Core() { return 1; }
