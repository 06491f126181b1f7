import './base.css';
import './celledits.css';
import './panel.css';
