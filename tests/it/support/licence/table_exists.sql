SELECT to_regclass('hookclaim_example_licences') IS NOT NULL
