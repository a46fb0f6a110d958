"""The init stage (rules/init.smk): the shared initial model every coverage regime's RL run starts from."""
