int Model() { return 4; }
