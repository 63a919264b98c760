/* a stand-in trial source for the config corpus: checked, never built */
int dt_corpus_trial;
