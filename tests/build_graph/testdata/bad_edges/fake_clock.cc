int FakeClock() { return 3; }
