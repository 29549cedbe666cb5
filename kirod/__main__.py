from kirod.daemon.main import main

raise SystemExit(main())
